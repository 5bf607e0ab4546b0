import dask
import pytest


@pytest.fixture(autouse=True)
def _threaded_scheduler():
    """Tests run on the threaded scheduler unless they set up another one."""
    with dask.config.set(scheduler="threads"):
        yield


from hypothesis import settings  # noqa: E402

# numba compiles on first call: time limits per example would measure the compiler
settings.register_profile("kcpstream", deadline=None)
settings.load_profile("kcpstream")
