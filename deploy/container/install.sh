#!/bin/sh
# Installs naiad from wheels into a new virtual environment: the core, the named backends and
# the framework builds of the variant. The container recipe (Dockerfile) runs it, and so does
# prove-install.sh in a clean venv on any machine, so the two cannot drift apart.
#
#   install.sh WHEELS PREFIX VARIANT BACKEND...
#     WHEELS   a directory of wheels from scripts/build-wheels.sh
#     PREFIX   the virtual environment to create (the image uses /opt/naiad)
#     VARIANT  cpu: CPU-only builds (torch's +cpu build, onnxruntime, tensorflow-cpu)
#              cuda: the CUDA builds and their nvidia-* library wheels (torch's default Linux
#              build, onnxruntime-gpu, tensorflow[and-cuda]); the host brings only the driver
#     BACKEND  python, onnx, pytorch, tensorflow, tensorrt
#   EXTRAS names extras of the core to add, e.g. "remote,gcs" (S3 and GCS repositories).
#   PYTHON names the interpreter that creates the environment (default python3).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 WHEELS PREFIX cpu|cuda BACKEND..." >&2; exit 2; }
wheels=$1 prefix=$2 variant=$3
shift 3
case $variant in cpu | cuda) ;; *) echo "$0: VARIANT is cpu or cuda, not $variant" >&2; exit 2 ;; esac
# The release whose CPU build scripts/setup.sh installs too.
torch_cpu="torch==2.13.0+cpu"

"${PYTHON:-python3}" -m venv "$prefix"
pip="$prefix/bin/python -m pip"
$pip install -q --upgrade pip

# Our wheels by file, so nothing of ours comes from an index (the core's transports,
# naiad-wire, included); the CUDA variant asks for each backend's [gpu] extra.
reqs="$(ls "$wheels"/naiad-[0-9]*.whl)${EXTRAS:+[$EXTRAS]} $(ls "$wheels"/naiad_wire-[0-9]*.whl)"
for backend in "$@"; do
  case $backend in python | onnx | pytorch | tensorflow | tensorrt) ;;
    *) echo "$0: unknown backend $backend" >&2; exit 2 ;; esac
  wheel=$(ls "$wheels"/naiad_backend_"$backend"-[0-9]*.whl)
  case $variant/$backend in cuda/onnx | cuda/tensorflow | cuda/tensorrt) wheel="$wheel[gpu]" ;; esac
  reqs="$reqs $wheel"
done
case " $variant $* " in *" cpu "*" pytorch "*)
  # PyPI's Linux torch is the CUDA build: install the CPU build first (from a configured
  # index, else PyTorch's CPU index) and pin it, so the backend's torch>=2.3 keeps it.
  $pip install -q "$torch_cpu" || $pip install -q --extra-index-url https://download.pytorch.org/whl/cpu "$torch_cpu"
  reqs="$reqs $torch_cpu" ;;
esac
# shellcheck disable=SC2086 # one word per requirement
$pip install -q $reqs

if [ "$variant" = cuda ]; then
  # The CPU and CUDA wheels of onnxruntime, and of TensorFlow, install the same module: keep
  # only the CUDA one, reinstalled whole once the CPU one's files are gone.
  case " $* " in *" onnx "*)
    $pip uninstall -q -y onnxruntime && $pip install -q --force-reinstall --no-deps onnxruntime-gpu ;;
  esac
  case " $* " in *" tensorflow "*)
    $pip uninstall -q -y tensorflow-cpu && $pip install -q --force-reinstall --no-deps tensorflow ;;
  esac
fi
"$prefix/bin/naiad" --help > /dev/null
echo "installed naiad ($variant; backends: $*) into $prefix"
