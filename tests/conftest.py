from pathlib import Path

import pytest

SILICON = Path(__file__).parent / "data" / "silicon"


@pytest.fixture(scope="session")
def silicon_dir():
    return SILICON
