# Helpers the side-by-side benchmark scripts share (sourced, after `py` is set to the
# Python that sees Debian's python3-torch).

# The median of the numbers given as arguments.
median() { "$py" -c 'import sys, statistics; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }

# tokens_per_s from the last JSON line of a run's stdout.
tps() { "$py" -c 'import sys, json; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["tokens_per_s"])'; }

# "dim layers heads context vocab batch data_dir" of a dseek config, with dseek's
# defaults (config/REFERENCE.md); data_dir is "-" when the config has none.
model_shape() {
  "$py" - "$1" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
m, t, d = c.get("model", {}), c.get("train", {}), c.get("data", {})
print(m.get("dim", 256), m.get("layers", 4), m.get("heads", 4), m.get("context", 128),
      m.get("vocab", 256), t.get("batch_size", 16), d.get("dir", "-"))
PY
}

# The header lines every result block starts with: the machine and the BLAS kernel
# (the same environment for dseek and its peer).
machine_line() { echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc)$*"; }
blas_line() {
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset: auto-detected>} for both sides;" \
       "kernel: $("$py" -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2>/dev/null || echo unknown)"
}
