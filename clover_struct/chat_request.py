"""An OpenAI chat completion request, read for the server: the text, the schema, the options.

The text is the user messages' content (strings or text parts), joined by blank lines; system
and assistant messages instruct a chat model and are not read. The schema is `response_format`'s:
{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}, or {"type": "json_object",
"schema": {...}} as instructor's JSON_SCHEMA mode sends it. `strict` always holds: every record
is validated against the schema as written before it is sent. What cannot be served is an ApiError in OpenAI's error shape. Knows
nothing of HTTP, models or decoding.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


class ApiError(Exception):
    """An answer in OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param=None, code=None,
                 **extra):
        super().__init__(message)
        self.status = status
        self.body = {"message": message, "type": type, "param": param, "code": code, **extra}


@dataclass(frozen=True)
class Request:
    """What one chat completion request asks the server to decode."""
    text: str
    schema: dict
    temperature: float
    seed: int | None
    max_tokens: int | None    # the most canvas tokens the client accepts
    stream: bool


def user_text(messages) -> str:
    """The text to extract from: the user messages' content (strings or text parts), blank-line joined."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "`messages` must be a non-empty list of {\"role\", \"content\"} objects", param="messages")
    texts = []
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(400, f"messages[{k}] must be an object with a `role` and a `content`", param="messages")
        if m["role"] != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            if any(not isinstance(p, dict) or p.get("type") != "text" for p in content):
                raise ApiError(400, f"messages[{k}]: only text parts can be read; send the text itself",
                               param="messages")
            if any(not isinstance(p.get("text"), str) for p in content):
                raise ApiError(400, f"messages[{k}]: a text part's `text` must be a string", param="messages")
            content = "\n".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise ApiError(400, f"messages[{k}].content must be a string or a list of text parts", param="messages")
        texts.append(content)
    if not texts:
        raise ApiError(400, "no user message: the text to extract from is the content of the user messages "
                            "(system messages are not read)", param="messages")
    return "\n\n".join(texts)


def requested_schema(fmt) -> dict:
    """The JSON Schema `response_format` asks for (titled by json_schema.name where it has no title)."""
    if fmt is None:
        raise ApiError(400, "this server does structured output only: send response_format {\"type\": "
                            "\"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}",
                       param="response_format", code="response_format_required")
    if not isinstance(fmt, dict):
        raise ApiError(400, f"response_format must be an object such as {{\"type\": \"json_schema\", ...}}, "
                            f"got {fmt!r}", param="response_format")
    kind = fmt.get("type")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise ApiError(400, "response_format.json_schema.schema must be a JSON Schema object",
                           param="response_format.json_schema")
        schema = spec["schema"]
        if isinstance(spec.get("name"), str) and "title" not in schema:
            schema = {"title": spec["name"], **schema}
    elif kind == "json_object":
        schema = fmt.get("schema")
        if not isinstance(schema, dict):
            raise ApiError(400, "json_object needs a schema here (a diffusion model fills a layout made from "
                                "one): send response_format {\"type\": \"json_object\", \"schema\": {...}}, or "
                                "type json_schema", param="response_format.schema")
    else:
        raise ApiError(400, f"response_format.type must be \"json_schema\" or \"json_object\", got {kind!r}",
                       param="response_format.type")
    return schema


def parse_request(body, served: str) -> Request:
    """What a chat completion request asks for; ApiError (400, 404) saying what to send instead."""
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object: a chat completion request")
    if body.get("model") not in (None, served):
        raise ApiError(404, f"model {body['model']!r} is not served here; this server serves {served!r}",
                       param="model", code="model_not_found")
    def whole(x):
        return isinstance(x, int) and not isinstance(x, bool)
    if body.get("n") is not None and not (whole(body["n"]) and body["n"] == 1):
        raise ApiError(400, "n must be 1: one record per request", param="n")
    temperature, seed = body.get("temperature"), body.get("seed")
    temperature = 0.0 if temperature is None else temperature
    limit = body["max_completion_tokens"] if body.get("max_completion_tokens") is not None else body.get("max_tokens")
    if not (whole(temperature) or isinstance(temperature, float)) or not 0 <= temperature <= sys.float_info.max:
        raise ApiError(400, f"temperature must be 0 (greedy, the default) or more, got {temperature!r}",
                       param="temperature")
    if seed is not None and not whole(seed):
        raise ApiError(400, f"seed must be a whole number, got {seed!r}", param="seed")
    if limit is not None and (not whole(limit) or limit < 1):
        raise ApiError(400, f"max_tokens must be a whole number of at least 1, got {limit!r}", param="max_tokens")
    stream = False if body.get("stream") is None else body["stream"]
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false", param="stream")
    return Request(user_text(body.get("messages")), requested_schema(body.get("response_format")),
                   float(temperature), seed, limit, stream)
