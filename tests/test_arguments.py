"""segment()'s arguments are declared once (kcpstream.engine.arguments): the
signature, the Segmenter, the command line and the job-file schema agree with
that table, and an argument neither the command line nor a job file takes says
why."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import kcpstream
from kcpstream.engine.arguments import ARGUMENTS, PARTS, names_of
from kcpstream.engine.plan import settings_of
from kcpstream.jobs import cli
from kcpstream.jobs.jobfile import SCHEMA

#: Options of ``kcpstream segment`` that are about the command, not the call.
COMMAND_ONLY = {"--out", "--scheduler", "--json"}


def _cli_options() -> dict[str, str]:
    """``kcpstream segment``'s options (and its argument) -> parameter name."""
    out = {}
    for param in cli.segment.params:
        if param.param_type_name == "argument":
            out[param.human_readable_name] = param.name
        for opt in param.opts:
            out[opt] = param.name
    return out


def test_the_table_is_segments_signature_in_order():
    params = list(inspect.signature(kcpstream.segment).parameters)
    assert [a.name for a in ARGUMENTS] == params
    assert all(a.part in PARTS for a in ARGUMENTS)


def test_settings_of_takes_the_statistics_selection_and_run_parts():
    taken = set(inspect.signature(settings_of).parameters)
    assert taken == set(names_of("statistics") + names_of("selection") + names_of("run"))


def test_every_argument_is_reachable_or_says_why_not():
    options = _cli_options()
    for arg in ARGUMENTS:
        if arg.option is None or arg.key is None:
            assert len(arg.python_only) > 20, arg.name  # a reason a user can act on
        else:
            assert arg.python_only == "", arg.name
        if arg.option is not None:
            assert arg.option in options, arg.option
        if arg.key is not None:
            section, key = arg.key.split(".")
            assert key in SCHEMA[section], arg.key


def test_every_option_of_segment_is_an_argument_or_the_commands_own():
    declared = {a.option for a in ARGUMENTS}
    given = {o for o in _cli_options() if o.startswith("--") and not o.startswith("--no-")}
    assert given - declared == COMMAND_ONLY


def test_every_selection_key_of_a_job_file_is_a_selection_argument():
    by_key = {a.key: a for a in ARGUMENTS if a.key}
    for key in SCHEMA["selection"]:
        assert by_key[f"selection.{key}"].part == "selection"


def test_the_job_files_d_max_bound_is_the_librarys():
    from kcpstream.engine.plan import MAX_D_MAX

    check = SCHEMA["selection"]["d_max"]
    assert check(MAX_D_MAX) is None and check(MAX_D_MAX + 1) is not None


def test_the_segmenter_takes_every_argument_but_a_batchs_and_a_checkpoints():
    from kcpstream import Segmenter

    taken = [
        *inspect.signature(Segmenter).parameters,
        *inspect.signature(Segmenter.fit).parameters,
        *inspect.signature(Segmenter.predict).parameters,
    ]
    taken = [t for t in taken if t != "self"]
    assert len(taken) == len(set(taken))
    assert set(taken) == {a.name for a in ARGUMENTS} - {"batch_dims", "checkpoint"}
    defaults = {k: p.default for k, p in inspect.signature(kcpstream.segment).parameters.items()}
    for fn in (Segmenter, Segmenter.fit, Segmenter.predict):
        for name, p in inspect.signature(fn).parameters.items():
            if name not in ("self", "data"):
                assert p.default == defaults[name], name


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(3)
    n = 6000
    a, b = rng.normal(size=n), rng.normal(size=n)
    b[3000:] *= 4
    ds = xr.Dataset({"a": ("time", a), "b": ("time", b), "c": ("time", rng.normal(size=n))})
    ds.to_zarr(tmp_path / "s.zarr")
    return str(tmp_path / "s.zarr"), ds


def test_variables_and_d_max_reach_segment_from_the_command_line(store):
    path, ds = store
    res = CliRunner().invoke(
        cli.main, ["segment", path, "--variables", "a", "--variables", "b", "--d-max", "7",
                   "--n-bkps", "1", "--out", path + ".json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    with open(path + ".json") as fh:
        got = kcpstream.Segmentation.from_json(fh.read())
    want = kcpstream.segment(ds, variables=["a", "b"], d_max=7, n_bkps=1)
    assert got.params["d_max"] == 7 and got.params["source"]["shape"] == [6000, 2]
    np.testing.assert_array_equal(got.changepoints, want.changepoints)


def test_variable_and_variables_together_are_one_clear_line(store):
    path, _ = store
    res = CliRunner().invoke(cli.main, ["segment", path, "--variable", "a", "--variables", "b"])
    assert res.exit_code == 1
    assert "not both" in res.output and len(res.output.strip().splitlines()) == 1


def test_run_and_watch_speak_of_progress_as_segment_does():
    for command in (cli.segment, cli.run, cli.watch):
        opts = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        assert {"--progress", "--no-progress"} <= opts, command.name


def test_a_repeated_variable_is_segmented_together_on_every_route(store):
    # the command line once kept the last --variable silently; a path could not
    # be given variables= at all, and refused a group the command line segmented
    path, ds = store
    want = kcpstream.segment(ds, variables=["a", "b"], n_bkps=1)
    res = CliRunner().invoke(
        cli.main, ["segment", path, "-v", "a", "-v", "b", "--n-bkps", "1", "--out", path + ".json"]
    )
    assert res.exit_code == 0, res.output
    with open(path + ".json") as fh:
        got = kcpstream.Segmentation.from_json(fh.read())
    assert got.params["source"]["shape"] == [6000, 2]
    np.testing.assert_array_equal(got.changepoints, want.changepoints)
    by_path = kcpstream.segment(path, variables=["a", "b"], n_bkps=1)
    np.testing.assert_array_equal(by_path.changepoints, want.changepoints)
    # a group given no variable is every variable along time, on both
    every = kcpstream.segment(path, n_bkps=1)
    assert every.params["source"]["shape"] == [6000, 3]
    np.testing.assert_array_equal(every.changepoints, kcpstream.segment(ds, n_bkps=1).changepoints)
    res = CliRunner().invoke(cli.main, ["segment", path, "-v", "a", "-v", "b", "--variables", "a"])
    assert res.exit_code == 1 and "not both" in res.output
    assert len(res.output.strip().splitlines()) == 1
