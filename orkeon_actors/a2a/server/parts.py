"""What an A2A message becomes on the hub, and what a hub message becomes in A2A.

* **Caller -> crew** (:func:`payload_of`): the message's text parts, joined by a
  newline, are the payload (a JSON string); a message holding exactly one data part and
  no text posts that data's JSON object instead, which ``a2a.input_schema`` checks
  (:func:`input_problem`). File parts are refused with a message saying so.
* **Crew -> caller** (:func:`parts_of`): a payload that is a JSON string is one text
  part; any other JSON value is one data part; a payload that is not JSON is a text part of its UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
from a2a.types import Message, Part
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

__all__ = ["input_problem", "parts_of", "payload_of", "text_of"]


def payload_of(message: Message) -> object:
    """The hub payload of a caller's ``message`` (module docstring). Raises
    ``ValueError`` saying what is wrong for a message with no usable part."""
    texts: list[str] = []
    data: list[Any] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            data.append(MessageToDict(part.data))
        else:
            raise ValueError(
                f"this agent reads text and data parts, not {kind} parts: send the content as text or data"
            )
    if data and not texts and len(data) == 1:
        return data[0]
    if data:
        raise ValueError("send either text parts or one data part, not both (nor several data parts)")
    if not texts:
        raise ValueError("the message has no part: send at least one text part")
    return "\n".join(texts)


def input_problem(payload: object, schema: Mapping[str, Any] | None) -> str | None:
    """Why ``payload`` does not satisfy the crew's declared ``input_schema``, or ``None``.
    A text payload is checked as a JSON string."""
    if schema is None:
        return None
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(payload))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(the input)"
    return f"the input does not match this agent's input schema at {where}: {error.message}"


def parts_of(payload: bytes) -> list[Part]:
    """The A2A parts of a hub ``payload`` (module docstring)."""
    try:
        value = json.loads(payload) if payload else ""
    except ValueError:
        return [Part(text=payload.decode("utf-8", errors="replace"))]
    if isinstance(value, str):
        return [Part(text=value)]
    return [Part(data=ParseDict(value, Value()), media_type="application/json")]


def text_of(message: Message) -> str:
    """The text parts of ``message``, joined by newlines."""
    return "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")
