"""A multiprocessing pool: mp_pool.py START_METHOD WORKERS TASKS.

Every worker marks its start (pool initializer) and wraps each task in a "task"
range; the parent wraps the whole map in "main". Workers exit normally (close+join).
Prints the sorted results.
"""

import multiprocessing as mp
import sys
import time

import torchprof


def init_worker():
    torchprof.mark("worker start")


def task(x):
    with torchprof.range("task"):
        time.sleep(0.02)
        return x * x


def main():
    method, workers, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctx = mp.get_context(method)
    with torchprof.range("main"):
        pool = ctx.Pool(workers, initializer=init_worker)
        results = pool.map(task, range(tasks), chunksize=1)
        pool.close()
        pool.join()
    print(sorted(results))


if __name__ == "__main__":
    main()
