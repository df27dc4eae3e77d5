"""Regenerate core/naiad/protos/*_pb2.py, and the *_pb2.pyi stubs that type them, from the
.proto files beside them.

The generated modules register their messages in naiad's own descriptor pool, not the
process-wide default one: tritonclient registers the same `inference.*` names in the
default pool, and both must be importable in one process (tests, BLS clients).

Run: python scripts/generate_protos.py [--check]
--check exits 1 when the committed modules differ from what would be generated.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = ROOT / "core"
PROTOS = CORE / "naiad" / "protos"
NAMES = ["model_config", "grpc_service", "health", "reflection"]

_DEFAULT_POOL = "_descriptor_pool.Default()"
_OWN_POOL = "_naiad_pool.POOL"


def generate(out_dir: pathlib.Path) -> None:
    args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{CORE}", f"--python_out={out_dir}", f"--pyi_out={out_dir}"]
    args += [str(PROTOS / f"{name}.proto") for name in NAMES]
    subprocess.run(args, check=True)
    for name in NAMES:
        path = out_dir / "naiad" / "protos" / f"{name}_pb2.py"
        text = path.read_text()
        if _DEFAULT_POOL not in text:
            raise SystemExit(f"{path.name}: protoc output no longer uses {_DEFAULT_POOL}")
        text = text.replace(_DEFAULT_POOL, _OWN_POOL)
        text = re.sub(
            r"^(from google\.protobuf import descriptor_pool as _descriptor_pool)$",
            r"\1\nfrom naiad.protos import _pool as _naiad_pool",
            text,
            count=1,
            flags=re.M,
        )
        path.write_text(text)


def main() -> int:
    check = "--check" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp)
        generate(out)
        stale = []
        for generated in sorted(f"{name}_pb2{suffix}" for name in NAMES for suffix in (".py", ".pyi")):
            fresh = (out / "naiad" / "protos" / generated).read_text()
            target = PROTOS / generated
            if check:
                if not target.exists() or target.read_text() != fresh:
                    stale.append(target.name)
            else:
                target.write_text(fresh)
    if stale:
        print("stale generated modules: " + ", ".join(stale) + "; run scripts/generate_protos.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
