"""``scripts/metaworld_plus_patch.py``: each patch lands once, where it belongs, or nothing is
written."""

import sys

import pytest

from scripts import metaworld_plus_patch as patch


def fake_checkout(tmp_path, *, last_twice=True):
    """A checkout holding each patched text once, the last one also earlier in the RL2 method and
    the whole RL2 method's texts also in another class (which must stay unpatched)."""
    loop = "\n".join(old for old, _ in patch.RL2_LOOP)
    if last_twice:
        loop = patch.RL2_LOOP[-1][0] + loop
    base = (
        "class Other:\n    def train(self):\n" + loop + "\n"
        "class RNNBasedMetaLearningAlgorithm(Base):\n    def train(self):\n" + loop + "\n"
        "class After:\n    pass\n"
    )
    (tmp_path / "metaworld_algorithms/rl/algorithms").mkdir(parents=True)
    (tmp_path / patch.RUN).write_text(patch.CPU_OLD + "\n" + patch.FINAL_EVAL_OLD + "\n")
    (tmp_path / patch.BASE).write_text(base)
    return base


def test_patches_only_the_rl2_train_method_and_its_last_iteration_end(tmp_path):
    base = fake_checkout(tmp_path)
    changes = patch.patched(tmp_path)
    new_base = changes[tmp_path / patch.BASE]
    other, rl2 = new_base.split("class RNNBasedMetaLearningAlgorithm")
    assert other == base.split("class RNNBasedMetaLearningAlgorithm")[0]
    for _, new in patch.RL2_LOOP[:-1]:
        assert rl2.count(new) == 1
    last_old, last_new = patch.RL2_LOOP[-1]
    assert rl2.count(last_new) == 1
    assert rl2.index(last_old) < rl2.index(last_new)  # the earlier occurrence kept
    assert changes[tmp_path / patch.RUN] == patch.CPU_NEW + "\n" + patch.FINAL_EVAL_NEW + "\n"


def test_a_patched_or_other_checkout_is_refused_before_any_file_changes(tmp_path, monkeypatch):
    base = fake_checkout(tmp_path, last_twice=False)
    for path, text in patch.patched(tmp_path).items():
        path.write_text(text)
    with pytest.raises(patch.PatchError, match="found it 0 times"):
        patch.patched(tmp_path)
    # run.py patchable, base.py not: neither is written
    run_text = patch.CPU_OLD + "\n" + patch.FINAL_EVAL_OLD + "\n"
    (tmp_path / patch.RUN).write_text(run_text)
    (tmp_path / patch.BASE).write_text(base.replace(patch.RL2_LOOP[0][0], ""))
    monkeypatch.setattr(sys, "argv", ["metaworld_plus_patch.py", str(tmp_path)])
    with pytest.raises(SystemExit, match="train: expected the text once"):
        patch.main()
    assert (tmp_path / patch.RUN).read_text() == run_text
