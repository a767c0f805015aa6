"""The opt-in ``mlx`` alias (kiln.mlx): ``python -m kiln.mlx`` runs a
program whose ``import mlx...`` resolve to kiln, in the processes it starts
too; nothing changes without it."""

import os
import subprocess
import sys
import textwrap

import kiln.core as kc

PROGRAM = textwrap.dedent(
    """
    import sys
    import mlx
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim
    import mlx.core.fast
    from mlx.utils import tree_flatten
    from mlx.core import random, linalg
    import kiln.core, kiln.nn
    assert mx is kiln.core and nn is kiln.nn, (mx, nn)
    assert mx.fast is kiln.core.fast and random is kiln.core.random
    print(mx.__version__, mlx.__version__, " ".join(sys.argv[1:]))
    print((mx.array([1, 2]) * 3).tolist(), str(mx.int32))
    import subprocess
    child = subprocess.run(
        [sys.executable, "-c", "import mlx.core as mx; print(mx.__name__)"],
        capture_output=True, text=True)
    print("child", child.stdout.strip())
    """
)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _run(args, tmp_path):
    return subprocess.run(
        [sys.executable, "-m", "kiln.mlx", *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
    )


def test_script_and_module_run_with_mlx_resolving_to_kiln(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    for args in (["prog.py", "a", "-b"], ["-m", "prog", "a", "-b"]):
        r = _run(args, tmp_path)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == f"{kc.__version__} {kc.__version__} a -b"
        assert lines[1] == "[3, 6] mlx.core.int32"  # as MLX prints it
        assert lines[2] == "child kiln.core"


def test_version_is_the_mlx_release_followed():
    parts = kc.__version__.split(".")
    assert len(parts) == 3 and all(p.isdigit() for p in parts)


def test_the_alias_is_off_unless_asked(tmp_path):
    code = "import kiln.core, sys; print('mlx' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, env=_env(), timeout=120)
    assert r.stdout.strip() == "False", r.stderr
    # --path names the stub directory; with it on PYTHONPATH, mlx is kiln.
    r = _run(["--path"], tmp_path)
    shim = r.stdout.strip()
    assert os.path.isfile(os.path.join(shim, "mlx", "__init__.py"))
    env = _env()
    env["PYTHONPATH"] = shim + os.pathsep + env["PYTHONPATH"]
    r = subprocess.run([sys.executable, "-c", "import mlx.nn as nn; print(nn.__name__)"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.strip() == "kiln.nn", r.stderr


def test_install_refuses_after_a_real_mlx_was_imported(tmp_path):
    code = textwrap.dedent(
        """
        import sys, types
        sys.modules["mlx"] = types.ModuleType("mlx")  # stands for a real MLX
        import kiln.mlx
        try:
            kiln.mlx.install()
        except RuntimeError as e:
            print("refused", "already imported" in str(e))
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, env=_env(), timeout=120)
    assert r.stdout.strip() == "refused True", r.stderr


def test_bad_usage(tmp_path):
    r = _run([], tmp_path)
    assert r.returncode == 2 and "usage" in r.stdout
    r = _run(["-m"], tmp_path)
    assert r.returncode == 2


def test_the_package_has_a_spec_for_find_spec(tmp_path):
    # Libraries probe for mlx with importlib.util.find_spec (transformers
    # does at import), which raises on a module without __spec__.
    code = textwrap.dedent(
        """
        import importlib.util
        import mlx
        spec = importlib.util.find_spec("mlx")
        print(spec.name, spec.submodule_search_locations is not None,
              importlib.util.find_spec("mlx.core") is not None)
        """
    )
    (tmp_path / "probe.py").write_text(code)
    r = _run(["probe.py"], tmp_path)
    assert r.stdout.strip() == "mlx True True", r.stderr
