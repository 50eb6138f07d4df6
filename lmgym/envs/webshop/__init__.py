"""WebShop (Yao et al., 2022): shop a catalogue by search and clicks for what an instruction asks.

Modules: `catalog` (the official product files, processed as the original loader does),
`goals` (synthetic and human goals, seeded price bounds, the original splits), `search`
(BM25 over the original's index text), `pages` (the page state machine and its text, text_rich
and html renderings), `env` (`WebShopEnv`), `expert` (a search-and-buy demonstrator) and
`reward` (the original's purchase reward). Importing this package loads none of them: the env
is made through ``gymnasium.make("lmgym/WebShop-v0")``.
"""
