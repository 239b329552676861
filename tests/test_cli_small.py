"""Small things an operator meets first (issue 25, item 7): a mistyped command gets a suggestion;
`cprsim show` prints a description as lines people can read, and what it prints loads back to the
same scenario."""

from __future__ import annotations

import tomllib

import pytest
from click.testing import CliRunner

from cprsim import scenario as sc
from cprsim.cli import main


@pytest.mark.parametrize(
    ("typed", "meant"), [("simulat", "'simulate'"), ("plna", "'plan'"), ("calibrat", "'calibrate'")]
)
def test_a_mistyped_command_gets_the_closest_names(typed, meant):
    r = CliRunner().invoke(main, [typed])
    assert r.exit_code == 2
    assert f"No such command '{typed}'. Did you mean {meant}" in r.output


def test_a_command_with_no_close_name_gets_clicks_message():
    r = CliRunner().invoke(main, ["xyzzy"])
    assert r.exit_code == 2 and "No such command 'xyzzy'." in r.output
    assert "Did you mean" not in r.output


@pytest.mark.parametrize("name", sc.builtin_names())
def test_show_prints_readable_lines_that_load_back(name, tmp_path):
    r = CliRunner().invoke(main, ["show", name])
    assert r.exit_code == 0, r.output
    text = r.output
    desc = sc.load(name).description
    if "\n" in desc:  # a multi-line description: its lines as written, not one escaped line
        assert '"""' in text and "\\n" not in text.split("seed =")[0]
    # nothing but the header comments and the TOML's own long values exceeds 130 columns
    assert max(len(line) for line in text.splitlines() if not line.startswith("#")) <= 130
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    assert tomllib.loads(text)["description"] == desc
    assert sc.load(str(path)) == sc.load(name)


@pytest.mark.parametrize("value", ["nan", "true", "1e308"])
def test_an_override_does_not_hide_a_bad_value_of_the_file(tmp_path, value):
    """`simulate F -n 2` refuses what `show F` refuses (issue 27): the file's own `replications =
    nan` used to be replaced by the option's value unchecked."""
    from cli_helpers import one_line_error, run

    f = tmp_path / "s.toml"
    f.write_text(f'name = "x"\nreplications = {value}\n')
    for args in (["show", f], ["simulate", f, "-n", 2], ["simulate", f, "--set", "replications=3"]):
        line = one_line_error(run(*args))
        assert str(f) in line and "replications" in line, line
