"""--help reads like a man page: our metavars, never typer's generated ones; an example under every
command; --version; record's --out-dir default in full; analyze says it writes nothing unless asked."""
from __future__ import annotations

import re

import pytest

from traceinsight import __version__

COMMANDS = ["", "analyze", "record", "diff"]
GENERATED = ["{traces}", "{before}", "{after}", "{SCRIPT}", "<bool>", "<path>", "<list[", "<int", "<float",
             "<str>", "[x>=", "int range", "float range"]


def _help(run_cli, command: str, columns: int = 80) -> str:
    import subprocess
    import sys
    from conftest import cli_env
    env = cli_env()
    env["COLUMNS"] = str(columns)
    args = [command, "--help"] if command else ["--help"]
    p = subprocess.run([sys.executable, "-m", "traceinsight", *args], capture_output=True, text=True,
                       env=env, stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _flat(text: str) -> str:
    """The help as one line of words: box drawing and line breaks gone."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_readable_metavars_and_an_example(run_cli, command):
    text = _help(run_cli, command)
    for bad in GENERATED:
        assert bad not in text, f"{command or 'traceinsight'} --help shows {bad!r}"
    assert "Examples:" in text and "traceinsight " + (command or "") in _flat(text.split("Examples:")[1])
    assert "…" not in text, "help text cut off"


def test_usage_lines_name_the_arguments(run_cli):
    assert "analyze [OPTIONS] TRACE..." in _help(run_cli, "analyze")
    assert "diff [OPTIONS] BEFORE AFTER" in _help(run_cli, "diff")
    assert "record [OPTIONS] SCRIPT [SCRIPT_ARGS]..." in _help(run_cli, "record")


def test_version(run_cli):
    p = run_cli(["--version"])
    assert p.returncode == 0 and p.stdout.strip() == f"traceinsight {__version__}"


def test_record_out_dir_default_is_not_cut_off(run_cli):
    text = _flat(_help(run_cli, "record", columns=80))
    assert "traceinsight-SCRIPT-DATE-TIME (DATE-TIME as YYYYmmdd-HHMMSS)" in text
    for metavar in ("--out-dir -o DIR", "--skip N", "--steps N", "--max-seconds S"):
        assert metavar in text


def test_analyze_help_says_nothing_is_written_without_an_output_option(run_cli):
    text = _flat(_help(run_cli, "analyze"))
    assert "Nothing is written unless you ask for a file with -o/--output (HTML), --json or --markdown" in text


def test_diff_help_documents_the_regression_gate(run_cli):
    text = _flat(_help(run_cli, "diff"))
    assert "--fail-on-regression [PCT]" in text and "regression" in text
