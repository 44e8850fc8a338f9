from work_units import work_unit


def test_a_test_file_is_one_unit() -> None:
    assert work_unit("tests/broker/test_fetch.py::test_a[1]") == "tests/broker/test_fetch.py"
    assert work_unit("tests/test_cli_args.py::TestX::test_y") == "tests/test_cli_args.py"


def test_a_directory_sharing_a_session_service_is_one_unit() -> None:
    assert work_unit("tests/operator/test_operator_roll.py::test_a") == "tests/operator/"
    assert work_unit("tests/operator/kube/test_x.py::test_b") == "tests/operator/"
    assert work_unit("tests/pipeline/test_pipeline_streaming.py::test_c") == "tests/pipeline/"
    assert work_unit("tests/operator_like/test_x.py::test_d") == "tests/operator_like/test_x.py"
