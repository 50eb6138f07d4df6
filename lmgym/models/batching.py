"""Token-id rows as one tensor batch: the padding every model call and trainer shares."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) token ids and attention mask of `rows`, padded on the left to the longest (T), so
    every row ends in the last column, where generation continues; the mask is 0 on padding."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, width - len(row):] = torch.tensor(row, dtype=torch.long)
        attention[index, width - len(row):] = 1
    return ids, attention
