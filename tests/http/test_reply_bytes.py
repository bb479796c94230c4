"""The answer's bytes: the direct form for `{"status", "event_id"}` is what `json.dumps` writes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from hookinbox._receiver import Outcome, Reply


@given(status=st.sampled_from([o.value for o in Outcome]), event_id=st.text())
def test_the_stored_answer_is_byte_for_byte_json_dumps(status: str, event_id: str) -> None:
    body = {"status": status, "event_id": event_id}
    assert Reply(200, body).content == json.dumps(body, separators=(",", ":")).encode()


@given(
    body=st.dictionaries(
        st.text(), st.one_of(st.text(), st.integers(), st.booleans(), st.none()), max_size=4
    )
)
def test_any_other_body_is_json_dumps_too(body: dict[str, object]) -> None:
    assert Reply(400, body).content == json.dumps(body, separators=(",", ":")).encode()
