import pkgutil

import robotmem
from robotmem import errors


def test_all_lists_exactly_the_public_names():
    # Submodules are importable (and become attributes once imported) but are not the star-import surface.
    submodules = {module.name for module in pkgutil.iter_modules(robotmem.__path__)}
    public = {name for name in dir(robotmem) if not name.startswith("_")} - submodules
    assert public == set(robotmem.__all__) - {"__version__"}


def test_every_error_derives_from_the_single_root():
    classes = [getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)]
    assert len(classes) >= 5
    for cls in classes:
        assert issubclass(cls, errors.RobotMemError)


def test_error_to_dict_gives_code_field_and_message():
    exc = errors.ValidationError("n must be between 1 and 100", field="n")
    assert exc.to_dict() == {"code": "validation_error", "field": "n", "message": "n must be between 1 and 100"}
    assert errors.NotFoundError("x").to_dict()["code"] == "not_found"
    assert errors.StorageError("x").to_dict()["code"] == "storage_error"
