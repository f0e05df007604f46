"""``metabench plot`` and ``table`` with nothing to make them from: a non-zero exit and one line
that names the folder and what it needs, or the result files there and why none can be used."""

import json

from metabench.cli import main
from tests.factories import make_result


def test_plot_on_an_empty_folder_names_it_and_what_it_needs(tmp_path, capsys):
    assert main(["plot", "--results", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"metabench: error: no result.json under {tmp_path}: ")
    assert "finished runs' result.json" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_table_on_a_folder_whose_only_result_is_truncated_names_it_and_why(tmp_path, capsys):
    result = tmp_path / "Bandit" / "nop-seed0" / "result.json"
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps(make_result("Bandit", "nop", 0, [[1.0, 2.0]]).to_json())[:40])
    assert main(["table", "--results", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"metabench: warning: skipped: {result} is unreadable (")
    assert err[1].startswith(
        f"metabench: error: the only result.json under {tmp_path} cannot be used: "
        f"{result} is unreadable ("
    )
    assert err[1].endswith("delete it and re-run") and len(err) == 2
    assert not (tmp_path / "README.md").exists()


def test_several_unusable_results_are_counted_and_the_first_named(tmp_path, capsys):
    for seed in (0, 1):
        path = tmp_path / f"nop-seed{seed}" / "result.json"
        path.parent.mkdir()
        record = make_result("Bandit", "nop", seed, [[1.0, 2.0]]).to_json()
        del record["metatest"]["tasks"][0]["episode_returns"]
        path.write_text(json.dumps(record))
    assert main(["plot", "--results", str(tmp_path)]) == 1
    error = capsys.readouterr().err.splitlines()[-1]
    first = tmp_path / "nop-seed0" / "result.json"
    assert error == (
        f"metabench: error: none of the 2 result.json under {tmp_path} can be used (each is "
        f"named above); the first: {first} lacks episode_returns: delete it and re-run"
    )
