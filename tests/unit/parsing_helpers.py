"""What the dataset-parsing tests share: arrays packed as an upload, and refusals checked by
the parts of their message."""

import io

import numpy as np
import pytest

from experiments.datasets.core import DatasetError


def npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def rejects(message_parts: list[str], call, *args, **kwargs) -> str:
    with pytest.raises(DatasetError) as caught:
        call(*args, **kwargs)
    message = str(caught.value)
    for part in message_parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message
