"""lmgym.models.batching.left_pad: rows end in the last column, padding is masked out."""

import torch

from lmgym.models.batching import left_pad


def test_rows_are_padded_on_the_left_and_masked():
    ids, attention = left_pad([[5, 6, 7], [8], []], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [0, 0, 0]] and ids.dtype == torch.long
    assert attention.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]
