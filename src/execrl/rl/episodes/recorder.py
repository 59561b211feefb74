"""Recording an agent harness's calls as token-exact trajectories, per episode.

A harness (any program that speaks the OpenAI API) sends the whole conversation as text on
every call. Re-tokenising that text would give ids the model did not produce (the field's most
reported multi-turn bug), so the recorder keeps, per episode, the ids so far and the text they
stand for, and gives the model `ids so far + encode(new text)` whenever the call's text starts
with the text so far: the policy's earlier tokens stay exactly as sampled.

What a call extends is, first, "the text so far" exactly: every id decoded (with a chat
template, the rendered conversation and each completion with its special tokens, since templates
write the end-of-turn token after an assistant message; as raw text, `/v1/completions` or chat
without a template, the completions without them). Failing that, the conversation as the harness
was shown it: a completion's text cut before its stop sequence, without special tokens the model
wrote mid-text. Then the tokens the harness never saw stay in the ids as sampled, and the call
says so (`CallRecord.how == "shown"`): the model is given what it produced, never a re-encoding.

When a call's text extends neither (the harness cut or rewrote its history, a sub-agent started
its own conversation, a chat template that re-renders past turns), the call starts a new
*segment*: its text is encoded from scratch, and that segment is its own token-exact sequence.
Nothing is silently re-tokenised: a policy token is only ever an id the engine sampled, and every
segment beyond the first is counted (`EpisodeRecording.segments`) and said in the log.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.rl.episodes.trajectory import Trajectory


class UnknownEpisode(LookupError):
    """A call named an episode the recorder was not told to open (strict recorders only)."""


@dataclass
class Segment:
    """One token-exact conversation of an episode, built call by call."""

    text: str  # every id so far decoded (the prefix a next call extends exactly)
    shown: str  # the conversation as the harness was shown it (its completions' text)
    raw: bool  # raw text (no chat template): completions are decoded without special tokens
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # 1 on the policy's tokens
    logprobs: list[float] = field(default_factory=list)  # behaviour log pi, 0.0 elsewhere
    spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each call
    calls: list[int] = field(default_factory=list)  # the episode's call numbers, in order
    prompt_length: int = 0
    busy: bool = False  # a call is generating on it: it cannot be extended until it lands

    def trajectory(self, rewards: Sequence[float]) -> Trajectory:
        return Trajectory(tuple(self.ids), tuple(self.mask), tuple(self.logprobs),
                          tuple(self.spans), tuple(rewards), self.prompt_length)  # fmt: skip


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call as served: what the model was given and what it produced."""

    call: int  # 0-based, in the order calls were admitted
    segment: int  # index into the episode's segments
    how: str  # "new" segment, or an extension of its text: "exact" or as "shown" (`_extend`)
    prompt_ids: tuple[int, ...]  # exactly the ids the engine was given
    token_ids: tuple[int, ...]  # exactly the ids it sampled
    logprobs: tuple[float, ...]  # their behaviour log-probabilities
    text: str  # the completion's text as returned to the harness
    finish: str  # "eos", "stop" or "length"
    temperature: float  # the temperature the log-probabilities are taken at
    added: str = ""  # the text the call added before the completion (a new segment: its prompt)


@dataclass
class EpisodeRecording:
    """Every call and segment of one episode."""

    episode_id: str
    segments: list[Segment] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    admitted: int = 0  # calls admitted (some may still be generating or have failed)
    refusals: list[str] = field(default_factory=list)  # why calls were refused, in order

    def trajectories(self, final_reward: float) -> list[Trajectory]:
        """One trajectory per segment; `final_reward` on the episode's last call, 0 elsewhere."""
        last = max((c.call for c in self.calls), default=-1)
        return [
            s.trajectory([final_reward if call == last else 0.0 for call in s.calls])
            for s in self.segments
            if s.calls  # a segment whose only call failed holds no policy tokens
        ]


@dataclass(frozen=True, slots=True)
class Ticket:
    """A call admitted to an episode: the ids to generate from, and where they will land."""

    episode_id: str
    call: int
    segment: int
    env_ids: tuple[int, ...]  # the ids this call adds before the completion (masked 0)
    env_text: str  # the text they stand for (a new segment: its whole prompt)
    prompt_ids: tuple[int, ...]  # what the engine is given
    how: str  # "new", "exact" or "shown" (`Recorder._extend`)
    text: str  # the call's whole conversation as the harness sent it

    @property
    def new_segment(self) -> bool:
        return self.how == "new"


class Recorder:
    """Episode id -> recording. Thread-safe: the HTTP server admits calls from many threads.

    An episode opened with `open` has a key, a secret the recorder made: a call records into
    it only when it carries that key (`episode_of`), never because it names the episode's id,
    which is no secret (it is in logs, folders, answers). `strict` (training): only such
    episodes are recorded. Without it (`execrl serve-policy`), a caller the server trusts may
    also name an episode, opened on first use (`admit(..., open_new=True)`); an episode opened
    with a key is its key holder's alone (`keyed`)."""

    def __init__(self, tokenizer: Any, *, strict: bool = False) -> None:
        self.tokenizer, self.strict = tokenizer, strict
        self._episodes: dict[str, EpisodeRecording] = {}
        self._keys: dict[str, str] = {}  # key -> the episode it opens
        self._lock = threading.Lock()

    def open(self, episode_id: str) -> str:
        """Open the episode; returns its key (256 random bits), to be handed to its harness
        alone."""
        key = secrets.token_urlsafe(32)
        with self._lock:
            if episode_id in self._episodes:
                raise ValueError(f"episode {episode_id!r} is open already")
            self._episodes[episode_id] = EpisodeRecording(episode_id)
            self._keys[key] = episode_id
        return key

    def episode_of(self, key: str) -> str | None:
        """The open episode `key` opens, or None."""
        with self._lock:
            for known, episode_id in self._keys.items():
                # no timing tells a key's prefix; bytes: a str with non-ASCII text is refused
                if hmac.compare_digest(known.encode(), key.encode("utf-8", "replace")):
                    return episode_id
        return None

    def keyed(self, episode_id: str) -> bool:
        """Whether the episode was opened with a key (its key holder's alone)."""
        with self._lock:
            return episode_id in self._keys.values()

    def close(self, episode_id: str) -> EpisodeRecording:
        """The episode's recording, forgotten by the recorder with its key (later calls are
        refused). Waits for nothing: the caller ends an episode once its harness has exited."""
        with self._lock:
            recording = self._episodes.pop(episode_id, None)
            self._keys = {k: e for k, e in self._keys.items() if e != episode_id}
        if recording is None:
            raise UnknownEpisode(f"episode {episode_id!r} was never opened")
        return recording

    def get(self, episode_id: str) -> EpisodeRecording | None:
        with self._lock:
            return self._episodes.get(episode_id)

    def episode_ids(self) -> list[str]:
        with self._lock:
            return list(self._episodes)

    def encode(self, text: str, *, raw: bool) -> tuple[int, ...]:
        """A first prompt's ids (bos and all for raw text), under the recorder's lock: a fast
        tokenizer must not be entered by two threads at once."""
        with self._lock:
            return tuple(self.tokenizer(text, add_special_tokens=raw)["input_ids"])

    def admit(self, episode_id: str, text: str, *, raw: bool, open_new: bool = False) -> Ticket:
        """The ids the model is given for a call whose conversation is `text`: an idle segment
        `text` extends (`_extend`), plus the new text's ids; else a new segment. The caller
        has checked the call may record into `episode_id`; `open_new`: opened on first use."""
        with self._lock:
            recording = self._episodes.get(episode_id)
            if recording is None:
                if self.strict or not open_new:
                    raise UnknownEpisode(f"episode {episode_id!r} is not open on this server")
                recording = self._episodes[episode_id] = EpisodeRecording(episode_id)
            call = recording.admitted
            recording.admitted += 1
            found = self._extend(recording, text, raw)
            if found is None:
                # a fresh conversation: bos and all, as a prompt is encoded for a first turn
                env_ids = self.tokenizer(text, add_special_tokens=raw)["input_ids"]
                recording.segments.append(Segment(text, text, raw))
                index, env_text, how = len(recording.segments) - 1, text, "new"
            else:
                index, env_ids, env_text, how = found
            segment = recording.segments[index]
            segment.busy = True
            prompt = tuple(segment.ids) + tuple(env_ids)
            return Ticket(episode_id, call, index, tuple(env_ids), env_text, prompt, how, text)

    def _extend(self, recording: EpisodeRecording, text: str, raw: bool):
        """(segment index, ids of the new text, the new text, how) for the longest idle segment
        whose text `text` extends: first the text of every id ("exact"), then the text the
        harness was shown ("shown": a stop sequence or special tokens it never saw stay in the
        ids, as sampled). None when none does or the new text does not encode reversibly."""
        for how in ("exact", "shown"):
            candidates = [
                (len(prefix), i)
                for i, s in enumerate(recording.segments)
                if not s.busy and s.raw == raw and s.ids
                and text.startswith(prefix := s.text if how == "exact" else s.shown)
            ]  # fmt: skip
            if not candidates:
                continue
            size, index = max(candidates)
            suffix = text[size:]
            ids = self.tokenizer.encode(suffix, add_special_tokens=False) if suffix else []
            if self.tokenizer.decode(ids, skip_special_tokens=False) != suffix:
                return None  # the ids would not be the text the harness sent
            return index, ids, suffix, how
        return None

    def land(self, ticket: Ticket, token_ids: Sequence[int], logprobs: Sequence[float],
             text: str, finish: str, temperature: float) -> CallRecord:  # fmt: skip
        """The call's completion (`text`: as the harness gets it), appended to its segment
        verbatim."""
        if len(token_ids) != len(logprobs):
            raise ValueError(f"{len(token_ids)} sampled tokens but {len(logprobs)} log-probs")
        with self._lock:
            recording = self._episodes.get(ticket.episode_id)
            if recording is None:  # closed while generating: the harness outlived its episode
                raise UnknownEpisode(f"episode {ticket.episode_id!r} ended during the call")
            segment = recording.segments[ticket.segment]
            if ticket.how == "new":
                segment.prompt_length = len(ticket.env_ids)
            else:  # the new text's ids decode to it exactly (`_extend` checked)
                segment.text += ticket.env_text
            _append(segment, list(ticket.env_ids), None)
            start = len(segment.ids)
            _append(segment, list(token_ids), list(logprobs))
            segment.spans.append((start, len(segment.ids)))
            segment.calls.append(ticket.call)
            ids = list(token_ids)
            segment.text += self.tokenizer.decode(ids, skip_special_tokens=segment.raw)
            # what the harness was shown: its text, and, with a chat template, the end-of-turn
            # token the template writes after an assistant message when the model ended on it
            segment.shown = ticket.text + text
            if not segment.raw and finish == "eos" and ids:
                segment.shown += self.tokenizer.decode(ids[-1:], skip_special_tokens=False)
            segment.busy = False
            record = CallRecord(ticket.call, ticket.segment, ticket.how, ticket.prompt_ids,
                                tuple(token_ids), tuple(logprobs), text, finish,
                                temperature, ticket.env_text)  # fmt: skip
            recording.calls.append(record)
            return record

    def refused(self, episode_id: str, message: str) -> None:
        """A call of an open episode was refused (kept for its note; others are ignored)."""
        with self._lock:
            recording = self._episodes.get(episode_id)
            if recording is not None and len(recording.refusals) < 10:
                recording.refusals.append(message)

    def release(self, ticket: Ticket) -> None:
        """A call that failed before its completion landed: its segment is free again, and a
        segment it would have started is left empty (never extended, never trained)."""
        with self._lock:
            recording = self._episodes.get(ticket.episode_id)
            if recording is not None:
                recording.segments[ticket.segment].busy = False


def _append(segment: Segment, ids: list[int], logprobs: list[float] | None) -> None:
    segment.ids.extend(ids)
    segment.mask.extend([0 if logprobs is None else 1] * len(ids))
    segment.logprobs.extend([0.0] * len(ids) if logprobs is None else logprobs)
