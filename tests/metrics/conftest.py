import pytest
from metrics_server import ADD_SUB, FAILING, make_model


@pytest.fixture
def repo(tmp_path):
    make_model(tmp_path, "add_sub", ADD_SUB)
    make_model(tmp_path, "failing", FAILING)
    return tmp_path
