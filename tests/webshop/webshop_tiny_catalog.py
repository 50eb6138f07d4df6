"""A hand-made catalogue in WebShop's raw layout, small enough to reason about in tests."""

from lmgym.envs.webshop.catalog import process_products
from lmgym.envs.webshop.search import SearchIndex

COLORS = [{"value": "Navy Blue", "image": "navy.jpg"}, {"value": "Red/White", "image": None}]
SIZES = [{"value": "Small"}, {"value": "Large"}]


def raw_products():
    """24 mugs (so a search for mugs fills three result pages), a tent, and an odd title."""
    items = []
    for i in range(24):
        items.append({
            "asin": f"B0MUG{i:05d}",
            "name": f"Ceramic Coffee Mug number {i}",
            "full_description": f"A ceramic mug, model {i}, dishwasher safe.",
            "small_description": [f"Holds {10 + i} ounces of coffee", "Dishwasher safe"],
            "pricing": "$12.00" if i % 2 else "$10.00 - $14.00",
            "images": [f"mug{i}.jpg"],
            "customization_options": {"Color": COLORS, "Size": SIZES} if i == 3 else "",
            "category": "garden",
            "query": "coffee mugs ",
            "product_category": "Home & Kitchen › Kitchen & Dining › Dining › Cups › Mugs",
            "average_rating": 4.5 if i == 3 else "",
        })
    items.append({
        "asin": "B0TENT0001",
        "name": "Backpacking Tent for 2 People, Waterproof",
        "full_description": "",
        "small_description": "Light tent for hiking",
        "pricing": "",
        "images": ["tent.jpg"],
        "customization_options": {"Color": None, "Style": [{"value": "Dome"}, {"value": "Tunnel"}]},
        "category": "garden",
        "query": "tents",
        "product_category": "Sports & Outdoors › Camping › Tents",
        "average_rating": "",
    })
    items.append({
        "asin": "B0ODD00001",
        "name": "<b>Bold</b> & \"quoted\" lamp",
        "full_description": "lamp <script>alert(1)</script>",
        "small_description": ["A lamp"],
        "pricing": "$5",
        "images": [],
        "customization_options": "",
        "category": "garden",
        "query": "lamps",
        "product_category": "Home › Lamps",
        "average_rating": "",
    })
    items.append(dict(items[0], name="duplicate of the first mug"))  # dropped: repeated asin
    items.append(dict(items[0], asin="nan"))  # dropped: asin "nan"
    return items


def attributes():
    attrs = {f"B0MUG{i:05d}": {"attributes": ["dishwasher safe"]} for i in range(24)}
    attrs["B0MUG00003"] = {
        "attributes": ["dishwasher safe", "microwave safe"],
        "instruction": "i want a dishwasher safe ceramic coffee mug",
        "instruction_attributes": ["dishwasher safe"],
    }
    attrs["B0TENT0001"] = {
        "attributes": ["waterproof"],
        "instruction": "i need a waterproof backpacking tent",
        "instruction_attributes": ["waterproof"],
    }
    return attrs  # the lamp has no entry: DUMMY_ATTR


def human_instructions():
    return {"B0TENT0001": [
        {"instruction": "find a dome tent that is waterproof.", "instruction_attributes": ["waterproof"],
         "instruction_options": ["dome"]},
        {"instruction": "a tent", "instruction_attributes": [], "instruction_options": []},  # skipped
    ]}


def tiny_catalog():
    return process_products(raw_products(), attributes(), human_instructions=human_instructions(), name="tiny")


def tiny_shop():
    catalog = tiny_catalog()
    return catalog, SearchIndex(catalog.products)
