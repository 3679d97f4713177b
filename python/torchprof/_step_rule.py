"""Which optimizer steps end a step: the rule behind the automatic ProfilerStep#k.

Pure logic with no torch in it; _torch_hooks.py feeds it the end time of every
outermost optimizer.step() and the optimizers' births and deaths, and it calls
emit(index, start_ns, end_ns) for each step it settles.

A step is one round of the program's optimizers, each of them stepping at least once:
it ends with a step of the *driver*. The driver closes rounds (every other optimizer
that steps repeatedly steps between two of its steps); of those that do, it is the one
that steps least often, and of those that step equally often the one that comes last
in a round (its first step came last). One optimizer: every step. A GAN loop
(D.step(), G.step()): G's. Five critic steps per generator step: the generator's. An
optimizer that wraps another and steps it from its own step(): the outer one, whose
step ends last. Optimizers that step one after the other, not in rounds (training
stages): the first, until it stops (below).

The driver is learned, not guessed: steps are held (with their times) until every
optimizer alive has stepped twice, or LIMIT optimizer steps have been seen, or the
program exits; then the held steps are settled and emitted at once, and the following
ones as they come. Step 0 starts when the last optimizer is created before the first
optimizer step (else when torch was imported).

The driver is learned again when it is garbage-collected, or when it stops stepping
while others go on: when another optimizer steps more than twice as often, relative
to it, as it did while the driver was learned (more than twice at all for an
optimizer that was not stepping then), e.g. a second training stage with an optimizer
of its own while the first one is still referenced.
"""

import math

LIMIT = 64  # optimizer steps held at most while the driver is learned
_NEW_OPTIMIZER_STEPS = 2  # steps without the driver that a newcomer may take


class StepRule:
    def __init__(self, emit, start_ns, limit=LIMIT):
        self._emit = emit
        self._limit = limit
        self.live = set()  # optimizers created and not yet collected
        self.reset(start_ns)

    def reset(self, start_ns):
        """Back to step 0 (a new process after fork, or a fresh start)."""
        self.index = 0
        self.start_ns = start_ns
        self.driver = None
        self._stepped_at_all = False
        self._retired = set()
        self._learn([])

    # --- what the hooks report --------------------------------------------------

    def created(self, key, now_ns):
        self.live.add(key)
        if not self._stepped_at_all:
            self.start_ns = now_ns

    def collected(self, key):
        self.live.discard(key)
        self._retired.discard(key)
        if key == self.driver:
            self.driver = None
            self._learn(self._since)

    def stepped(self, key, end_ns):
        self._stepped_at_all = True
        self.live.add(key)
        if self.driver is None:
            self._held.append((key, end_ns))
            self._retired.discard(key)
            if self._can_decide():
                self._decide()
        elif key == self.driver:
            self._end_step(end_ns)
        else:
            self._other_stepped(key, end_ns)

    def flush(self):
        """At exit: settle whatever is held."""
        if self.driver is None and self._held:
            self._decide()

    # --- learning --------------------------------------------------------------

    def _learn(self, held):
        self.driver = None
        self._held = list(held)[-self._limit:]
        self._since = []
        self._since_counts = {}
        self._thresholds = {}

    def _can_decide(self):
        if len(self._held) >= self._limit:
            return True
        counts = _counts(self._held)
        return all(counts.get(k, 0) >= 2 for k in self.live - self._retired)

    def _decide(self):
        held = self._held
        counts = _counts(held)
        first = {}
        for position, (key, _) in enumerate(held):
            first.setdefault(key, position)
        periodic = [k for k in counts if counts[k] >= 2] or list(counts)
        rounds = [k for k in periodic if _closes_rounds(held, k, periodic)]
        if rounds:
            driver = min(rounds, key=lambda k: (counts[k], -first[k]))
        else:  # stages, not rounds: the first one drives until it stops
            driver = min(periodic, key=lambda k: first[k])
        self._learn([])
        self.driver = driver
        self._thresholds = {k: 2 * math.ceil(n / counts[driver]) for k, n in counts.items() if k != driver}
        for key, end_ns in held:
            if key == driver:
                self._end_step(end_ns)
            else:
                self._since.append((key, end_ns))
                self._since_counts[key] = self._since_counts.get(key, 0) + 1

    # --- driven ----------------------------------------------------------------

    def _end_step(self, end_ns):
        self._emit(self.index, self.start_ns, end_ns)
        self.index += 1
        self.start_ns = end_ns
        self._since = []
        self._since_counts = {}

    def _other_stepped(self, key, end_ns):
        self._since.append((key, end_ns))
        if len(self._since) > self._limit:
            del self._since[0]
        n = self._since_counts.get(key, 0) + 1
        self._since_counts[key] = n
        if n > self._thresholds.get(key, _NEW_OPTIMIZER_STEPS):
            self._retired.add(self.driver)
            self._learn(self._since)
            if self._can_decide():
                self._decide()


def _counts(held):
    counts = {}
    for key, _ in held:
        counts[key] = counts.get(key, 0) + 1
    return counts


def _closes_rounds(held, driver, periodic):
    """True when every other periodic optimizer steps between each two steps of
    `driver`: its steps close rounds of all of them."""
    others = set(periodic) - {driver}
    seen = None  # the others seen since driver's last step; None before its first
    for key, _ in held:
        if key == driver:
            if seen is not None and seen != others:
                return False
            seen = set()
        elif seen is not None and key in others:
            seen.add(key)
    return True
