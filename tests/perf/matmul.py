"""matmul.py - a Python program whose time is in a native numerical call:
numpy's matrix product (BLAS dgemm) in a loop for 1.5 s of CPU time."""
import time

import numpy as np

a = np.random.default_rng(1).random((300, 300))
end = time.process_time() + 1.5
while time.process_time() < end:
    b = a @ a
print("matmul done", b.shape)
