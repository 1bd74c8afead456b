import robotmem
from robotmem import errors


def test_all_lists_exactly_the_public_names():
    public = {name for name in dir(robotmem) if not name.startswith("_")} - {
        # submodules are importable but not part of the star-import surface
        "cli", "config", "context", "consolidation", "embeddings", "errors", "mcp", "models", "payload",
        "search", "service", "store", "transfer", "validation",
    }
    assert public == set(robotmem.__all__) - {"__version__"}


def test_every_error_derives_from_the_single_root():
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.RobotMemError)


def test_error_to_dict_gives_code_field_and_message():
    exc = errors.ValidationError("n must be between 1 and 100", field="n")
    assert exc.to_dict() == {"code": "validation_error", "field": "n", "message": "n must be between 1 and 100"}
    assert errors.NotFoundError("x").to_dict()["code"] == "not_found"
    assert errors.StorageError("x").to_dict()["code"] == "storage_error"
