"""The shared signal state machine: findings in, raised and cleared signals out.

Keyed by (signal, subject) and driven by frame timestamps. For every key:

    quiet ──score ≥ 1──► pending ──enough evidence──► active ──score < hold, clear_after_s──► quiet
              ▲             │ score < 1                  │ critical twice in a row: escalate
              └─────────────┘                            │   (raised again, critical)
                                                         │ no critical for 3 × clear_after_s:
                                                         │   back to warning (silent)

"Enough evidence" is the policy's ``raise_evidence`` summed over consecutive
observations scoring at least 1 (each counted up to 3), with at least
``min_observations`` of them: one noisy tick never raises, a blatant fault
raises on its second observation. A detector that judged a tick without
mentioning one of its keys scored it 0 — whatever else it mentioned. A key
nobody judged for ``stale_after_s`` is cleared. While a signal is active its
message and evidence are those of its latest finding, so a held signal says
what is true now, not what was true when it was raised.
"""

from __future__ import annotations

from collections.abc import Sequence

from .types import CRITICAL, WARNING, Finding, Policy, Signal, Transition

EVIDENCE_CAP = 3.0
#: A critical signal goes back to warning after this many clear_after_s without a critical finding.
DEESCALATE_FACTOR = 3.0


class _State:
    __slots__ = (
        "active",
        "below_since",
        "criticals",
        "evidence",
        "finding",
        "last_critical",
        "last_seen",
        "pending_since",
        "policy",
        "positives",
        "severity",
        "since",
    )

    def __init__(self, policy: Policy, finding: Finding, ts: float) -> None:
        self.policy = policy
        self.finding = finding
        self.active = False
        self.severity = WARNING
        self.since = ts
        self.pending_since: float | None = None
        self.evidence = 0.0
        self.positives = 0
        self.below_since: float | None = None
        self.last_seen = ts
        self.criticals = 0
        self.last_critical = ts


class SignalTracker:
    """Holds every signal's state; ``observe`` one detector's findings, ``expire`` each tick."""

    def __init__(self) -> None:
        self._states: dict[tuple, _State] = {}
        self._by_source: dict[int, set[tuple]] = {}
        self._transitions: list[Transition] = []
        self._active_changed = True
        self._signals: tuple[Signal, ...] = ()

    # ------------------------------------------------------------ input

    def observe(self, source: int, findings: Sequence[Finding], policy: Policy, ts: float) -> None:
        """Apply what detector ``source`` found at ``ts``; its keys it did not mention scored 0."""
        mine = self._by_source.get(source)
        if not findings and not mine:
            return  # the common healthy case: nothing found, nothing pending
        if mine is None:
            mine = self._by_source[source] = set()
        seen: set[tuple] = set()  # the keys of ``mine`` this call mentioned
        for f in findings:
            key = f.key
            state = self._states.get(key)
            if state is None:
                if f.score < 1.0:
                    continue  # a new key below the raise level: nothing to track (and not one of mine)
                state = self._states[key] = _State(policy, f, ts)
                mine.add(key)
            seen.add(key)
            self._step(key, state, f, f.score, ts)
        for key in [k for k in mine if k not in seen] if len(seen) < len(mine) else ():
            state = self._states[key]
            self._step(key, state, state.finding, 0.0, ts)

    def _step(self, key: tuple, st: _State, f: Finding, score: float, ts: float) -> None:
        st.last_seen = ts
        if score > 0:
            st.finding = f
        if not st.active:
            self._step_pending(key, st, f, score, ts)
            return
        if score >= st.policy.hold:
            st.below_since = None
        elif st.below_since is None:
            st.below_since = ts
        elif ts - st.below_since >= st.policy.clear_after_s:
            self._clear(key, st, ts)
            return
        self._step_severity(st, f, score, ts)
        self._active_changed = True

    def _step_pending(self, key: tuple, st: _State, f: Finding, score: float, ts: float) -> None:
        if score < 1.0:
            self._forget(key)
            return
        if st.pending_since is None:
            st.pending_since, st.evidence, st.positives = ts, 0.0, 0
        st.evidence += min(score, EVIDENCE_CAP)
        st.positives += 1
        st.criticals = st.criticals + 1 if f.severity == CRITICAL else 0
        policy = st.policy
        if st.positives >= policy.min_observations and st.evidence >= policy.raise_evidence:
            st.active, st.since, st.below_since = True, st.pending_since, None
            st.severity = CRITICAL if st.criticals >= 2 else WARNING
            st.last_critical = ts
            self._emit(ts, "raised", st)

    def _step_severity(self, st: _State, f: Finding, score: float, ts: float) -> None:
        if score >= 1.0 and f.severity == CRITICAL:
            st.criticals += 1
            st.last_critical = ts
            if st.severity != CRITICAL and st.criticals >= 2:
                st.severity = CRITICAL
                self._emit(ts, "raised", st)
            return
        st.criticals = 0
        if st.severity == CRITICAL and ts - st.last_critical >= DEESCALATE_FACTOR * st.policy.clear_after_s:
            st.severity = WARNING

    def expire(self, ts: float) -> None:
        """Clear keys no detector has judged for their ``stale_after_s``."""
        stale = [k for k, st in self._states.items() if ts - st.last_seen >= st.policy.stale_after_s]
        for key in stale:
            st = self._states[key]
            if st.active:
                self._clear(key, st, ts)
            else:
                self._forget(key)

    # ------------------------------------------------------------ transitions

    def _emit(self, ts: float, event: str, st: _State) -> None:
        f = st.finding
        self._transitions.append(Transition(ts, event, f.signal, st.severity, dict(f.subject), f.message))
        self._active_changed = True

    def _clear(self, key: tuple, st: _State, ts: float) -> None:
        f = st.finding
        message = f"{f.signal} cleared"
        self._transitions.append(Transition(ts, "cleared", f.signal, st.severity, dict(f.subject), message))
        self._forget(key)
        self._active_changed = True

    def _forget(self, key: tuple) -> None:
        del self._states[key]
        for keys in self._by_source.values():
            keys.discard(key)

    # ------------------------------------------------------------ output

    def drain(self) -> tuple[Transition, ...]:
        """The transitions since the last drain, oldest first."""
        out = tuple(self._transitions)
        self._transitions.clear()
        return out

    def signals(self) -> tuple[Signal, ...]:
        """The active signals, critical first, then oldest first."""
        if self._active_changed:
            self._active_changed = False
            active = [st for st in self._states.values() if st.active]
            active.sort(key=lambda st: (st.severity != CRITICAL, st.since, st.finding.signal))
            self._signals = tuple(
                Signal(
                    st.finding.signal,
                    st.severity,
                    st.since,
                    st.finding.message,
                    st.finding.subject,
                    st.finding.evidence,
                )
                for st in active
            )
        return self._signals
