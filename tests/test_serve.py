"""The HTTP server (clover_struct/serve.py) on 127.0.0.1, called with the real openai client and instructor:
schemas in, valid JSON out, errors in OpenAI's shape, joint batches, streams of partial records, the key."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Literal, Optional

import httpx
import instructor
import openai
import pytest
from pydantic import BaseModel, Field

from clover_struct import extract, load_model
from clover_struct.schemas.airspace import NoFlyZone
from clover_struct.serve import create_app, in_thread, settled

NOTICES = [json.loads(line)["text"] for line in
           (Path(__file__).resolve().parents[1] / "clover_struct" / "demo" / "notices.jsonl").open()]
CONTACT = {"type": "object", "title": "contact",
           "properties": {"name": {"type": "string", "maxLength": 20},
                          "priority": {"enum": ["low", "high"]},
                          "floor": {"type": "integer", "minimum": 0, "maximum": 99}},
           "required": ["name", "priority", "floor"]}
MULTIPLE = {"type": "object", "title": "number",     # no integer in 1..9 is a multiple of 10
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9, "multipleOf": 10}}, "required": ["n"]}
EMPTY = {"type": "object", "title": "code",          # a code of 2 to 4 characters that holds no character
         "properties": {"code": {"type": "string", "minLength": 2, "maxLength": 4, "not": {"pattern": "."}}},
         "required": ["code"]}


def fmt(schema, name="record", **extra):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, **extra}}


def user(text):
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def model():
    return load_model()


@pytest.fixture(scope="module")
def url(model):
    with in_thread(create_app(model, max_batch=8, max_wait_ms=5)) as base:
        yield base


@pytest.fixture
def client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def test_models_lists_the_served_model(client):
    assert [m.id for m in client.models.list().data] == ["clover-mini"]


def test_a_pydantic_schema_and_a_hand_written_one_give_valid_json(client, model):
    reply = client.chat.completions.create(model="clover-mini", messages=user(NOTICES[0]),
                                           response_format=fmt(NoFlyZone.model_json_schema(), "NoFlyZone"))
    zone = NoFlyZone.model_validate_json(reply.choices[0].message.content)
    assert zone == extract(NOTICES[0], NoFlyZone, model=model)
    assert reply.usage.prompt_tokens > 0 and reply.usage.forward_passes >= 1
    assert reply.usage.completion_tokens == reply.usage.total_tokens - reply.usage.prompt_tokens > 0

    text = "Ask Dana on floor 12, it is urgent."
    reply = client.chat.completions.create(model="clover-mini", messages=user(text),
                                           response_format=fmt(CONTACT, "contact", strict=True))
    record = json.loads(reply.choices[0].message.content)
    assert set(record) == {"name", "priority", "floor"} and record["priority"] in ("low", "high")
    assert isinstance(record["floor"], int) and 0 <= record["floor"] <= 99 and len(record["name"]) <= 20
    assert record == extract(text, CONTACT, model=model)


def test_a_text_whose_letters_take_several_tokens_is_laid_out_as_extract_lays_it_out(client, model):
    from clover_struct.api import prepare
    from clover_struct.vocab import letter_tokens

    text = "Ask Дмитрий on floor 12, it is urgent."
    width = letter_tokens(model.tokenizer, text)
    reply = client.chat.completions.create(model="clover-mini", messages=user(text), response_format=fmt(CONTACT))
    assert reply.usage.completion_tokens == len(prepare(CONTACT, model, None, width)[1]) > len(prepare(CONTACT, model)[1])
    assert json.loads(reply.choices[0].message.content) == extract(text, CONTACT, model=model)


def test_system_messages_are_not_read_and_user_messages_are_joined(client, model):
    messages = [{"role": "system", "content": "You are a parser."}, {"role": "user", "content": NOTICES[1]},
                {"role": "user", "content": [{"type": "text", "text": NOTICES[2]}]}]
    reply = client.chat.completions.create(model="clover-mini", messages=messages,
                                           response_format=fmt(NoFlyZone.model_json_schema()))
    alone = extract(NOTICES[1] + "\n\n" + NOTICES[2], NoFlyZone, model=model)
    assert NoFlyZone.model_validate_json(reply.choices[0].message.content) == alone


def test_instructor_in_json_schema_mode_returns_the_pydantic_instance(url, model):
    client = instructor.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0),
                                    mode=instructor.Mode.JSON_SCHEMA)
    zone = client.chat.completions.create(model="clover-mini", response_model=NoFlyZone, messages=user(NOTICES[3]),
                                          max_retries=0)
    # (instructor adds the raw reply to the instance, so compare the fields)
    assert isinstance(zone, NoFlyZone) and zone.model_dump() == extract(NOTICES[3], NoFlyZone, model=model).model_dump()


def test_a_schema_that_cannot_be_laid_out_is_a_bad_request_with_the_reason(client):
    remote = {"type": "object", "properties": {"a": {"$ref": "https://schemas.clover.invalid/a.json"}}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="clover-mini", messages=user("x"), response_format=fmt(remote))
    assert "points outside this schema" in e.value.body["message"] and e.value.body["param"] == "response_format"
    checked = {**CONTACT, "minProperties": 2}   # strict holds: the record is checked against the schema as written
    reply = client.chat.completions.create(model="clover-mini", messages=user("Dana, floor 3"),
                                           response_format=fmt(checked, strict=True))
    assert set(json.loads(reply.choices[0].message.content)) == {"name", "priority", "floor"}


def test_without_a_response_format_the_answer_says_structured_output_only(client):
    with pytest.raises(openai.BadRequestError, match="structured output only") as e:
        client.chat.completions.create(model="clover-mini", messages=user("hello"))
    assert e.value.body["code"] == "response_format_required"
    with pytest.raises(openai.BadRequestError, match="json_object needs a schema"):
        client.chat.completions.create(model="clover-mini", messages=user("hi"), response_format={"type": "json_object"})
    with pytest.raises(openai.BadRequestError) as e:   # (it had said: got None)
        client.chat.completions.create(model="clover-mini", messages=user("hi"), response_format="json")
    message = e.value.body["message"]
    assert message.startswith("response_format must be an object") and "got 'json'" in message


def test_a_field_no_valid_value_is_found_for_is_422_with_its_path_and_reason(client):
    """A schema the layout sees no value can meet is refused (400); one only the final check
    finds unmet (`not`) is an extraction error (422)."""
    with pytest.raises(openai.BadRequestError, match="no integer meets its bounds and multipleOf") as e:
        client.chat.completions.create(model="clover-mini", messages=user("the number is 5"),
                                       response_format=fmt(MULTIPLE))
    assert e.value.body["code"] == "schema_not_supported" and "field `n`" in e.value.body["message"]
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model="clover-mini", messages=user("the code is AB"), response_format=fmt(EMPTY))
    body = e.value.body
    assert body["type"] == "extraction_error" and body["path"] == "code" and "should not be valid" in body["reason"]


def test_malformed_requests_get_openai_error_objects(url):
    def post(body, **kw):
        reply = httpx.post(url + "/v1/chat/completions", content=body, **kw)
        error = reply.json()["error"]
        assert set(error) >= {"message", "type", "param", "code"}, error
        return reply.status_code, error

    assert post("{not json")[0] == 400
    status, error = post("[" * 100_000 + "]" * 100_000)
    assert status == 400 and "deeper than a JSON reader goes" in error["message"]
    assert post(json.dumps({"messages": "hi", "response_format": fmt(CONTACT)}))[1]["param"] == "messages"
    assert post(json.dumps({"messages": user("x"), "response_format": fmt(CONTACT), "n": 2}))[1]["param"] == "n"
    for bad, param in (({"temperature": -1}, "temperature"), ({"max_tokens": 0}, "max_tokens"), ({"seed": "a"}, "seed"),
                       ({"seed": 2**64}, "seed")):
        assert post(json.dumps({"messages": user("x"), "response_format": fmt(CONTACT), **bad}))[1]["param"] == param
    status, error = post(json.dumps({"messages": user("x"), "response_format": fmt(CONTACT), "max_tokens": 5}))
    assert status == 400 and "more than max_tokens 5" in error["message"]
    status, error = post(json.dumps({"model": "gpt-4o", "messages": user("x"), "response_format": fmt(CONTACT)}))
    assert status == 404 and "serves 'clover-mini'" in error["message"]
    status, error = post(json.dumps({"messages": user("A1234/26 " * 3000), "response_format": fmt(CONTACT)}))
    assert status == 400 and error["code"] == "context_length_exceeded", error
    over = int(error["message"].split(" tokens more than")[0].split()[-1])
    assert over > 0 and "context of 4096" in error["message"]
    assert post(json.dumps({"messages": user("x"), "response_format": fmt(CONTACT)}) + " " * (1 << 20))[0] == 413
    for text in ("Dana \ud800 floor 12", "  "):   # a lone surrogate, no text: the client's, with what to send
        status, error = post(json.dumps({"messages": user(text), "response_format": fmt(CONTACT)}))
        assert status == 400 and error["param"] == "messages", error
    for number in ("NaN", "1e999"):   # no finite number: no record could be written as JSON
        body = '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", ' \
               '"json_schema": {"name": "v", "schema": {"properties": {"v": {"const": %s}}}}}}' % number
        status, error = post(body)
        assert status == 400 and "not finite" in error["message"], error
    parts = [{"role": "user", "content": [{"type": "text", "text": {"a": 1}}]}]
    assert post(json.dumps({"messages": parts, "response_format": fmt(CONTACT)}))[1]["param"] == "messages"
    assert post(json.dumps({"messages": user("x"), "response_format": fmt(CONTACT), "n": True}))[1]["param"] == "n"
    status, error = post(json.dumps({"messages": user("x"), "response_format": fmt(CONTACT), "max_tokens": 5,
                                     "max_completion_tokens": None}))
    assert status == 400 and "more than max_tokens 5" in error["message"]
    assert httpx.get(url + "/v1/nothing").json()["error"]["message"].startswith("GET /v1/nothing")
    for bad in ("1" + "0" * 400, '""', "[]", "false"):   # a 500, or taken as 0, before
        status, error = post('{"messages": [{"role": "user", "content": "x"}], "response_format": %s, '
                             '"temperature": %s}' % (json.dumps(fmt(CONTACT)), bad))
        assert status == 400 and error["param"] == "temperature", (bad, error)
    status, error = post('{"messages": [], "seed": %s}' % ("1" * 5000))
    assert status == 400 and "of 5000 digits" in error["message"] and "sys.set_int" not in error["message"]
    for schema, where in ((dict(CONTACT, title="\ud800"), "lone surrogate"),   # a 500 ("a bug") before
                          ({"type": "object", "properties": {"\udc00": {"type": "integer"}}}, "lone surrogate")):
        status, error = post(json.dumps({"messages": user("x"), "response_format": fmt(schema)}))
        assert status == 400 and where in error["message"] and error["param"] == "response_format", error
    untitled = {k: v for k, v in CONTACT.items() if k != "title"}   # the name titles it
    long_name = {"type": "json_schema", "json_schema": {"name": "n" * 20_000, "schema": untitled}}
    status, error = post(json.dumps({"messages": user("x"), "response_format": long_name}))
    assert status == 400 and "shorten the title" in error["message"], error   # not the messages
    reply = httpx.get(url + "/v1/chat/completions")
    assert reply.status_code == 405 and "POST" in reply.headers["allow"]


def test_null_stream_is_no_stream(url):   # OpenAI's API lets stream be null (a 400 before)
    reply = httpx.post(url + "/v1/chat/completions", json={"messages": user("Dana, floor 12"), "stream": None,
                                                          "response_format": fmt(CONTACT)})
    assert reply.status_code == 200 and json.loads(reply.json()["choices"][0]["message"]["content"])


def test_concurrent_requests_of_two_schemas_are_one_batch(model):
    # the batch starts when its fourth request arrives (the wait is far longer than the test)
    requests = [(NOTICES[4], NoFlyZone.model_json_schema()), ("Lee on floor 7, low priority", CONTACT),
                (NOTICES[5], NoFlyZone.model_json_schema()), ("Urgent: Kim, floor 31", CONTACT)]
    with in_thread(create_app(model, max_batch=4, max_wait_ms=600_000)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(lambda r: client.chat.completions.create(
                model="clover-mini", messages=user(r[0]), response_format=fmt(r[1])), requests))
        health = httpx.get(base + "/health").json()
    assert (health["requests"], health["batches"], health["decodes"], health["in_flight"]) == (4, 1, 2, 0)
    for (text, schema), reply in zip(requests, replies):
        assert json.loads(reply.choices[0].message.content) == extract(text, schema, model=model)


def test_a_stream_yields_partial_records_that_end_in_the_final_one(client):
    notice = NOTICES[10]   # one of the notices clover-mini settles over several steps
    kw = dict(model="clover-mini", messages=user(notice), response_format=fmt(NoFlyZone.model_json_schema()))
    final = json.loads(client.chat.completions.create(**kw).choices[0].message.content)
    chunks = list(client.chat.completions.create(stream=True, **kw))
    objects = [json.loads(c.choices[0].delta.content) for c in chunks]
    assert len(objects) >= 3 and objects[-1] == final and chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])

    def leaves(obj, path=""):
        items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else None
        if items is None:
            return {path: obj}
        return {k: v for key, sub in items if sub is not None for k, v in leaves(sub, f"{path}.{key}").items()}
    partials = [leaves(o) for o in objects[:-1]]
    assert all(a.keys() < b.keys() for a, b in zip(partials, partials[1:])), "each step settles more fields"
    assert len(partials[0]) < len(leaves(final))


def test_a_stream_the_schema_is_refused_for_is_a_400_before_any_event(client):
    with pytest.raises(openai.BadRequestError, match="no integer meets its bounds"):
        client.chat.completions.create(model="clover-mini", messages=user("the code is AB"), stream=True,
                                       response_format=fmt(MULTIPLE))


def test_an_error_in_a_stream_is_an_error_event(client):
    stream = client.chat.completions.create(model="clover-mini", messages=user("the code is AB"),
                                            response_format=fmt(EMPTY), stream=True)
    with pytest.raises(openai.APIError, match="should not be valid"):
        list(stream)


def test_the_api_key_is_checked_when_given(model):
    with in_thread(create_app(model, api_key="s3cret")) as base:
        kw = dict(model="clover-mini", messages=user("Dana, floor 2"), response_format=fmt(CONTACT))
        for wrong in ("nope", "s3cre"):
            with pytest.raises(openai.AuthenticationError, match="Bearer KEY"):
                openai.OpenAI(base_url=base + "/v1", api_key=wrong, max_retries=0).chat.completions.create(**kw)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=base + "/v1", api_key="nope", max_retries=0).models.list()
        assert openai.OpenAI(base_url=base + "/v1", api_key="s3cret").chat.completions.create(**kw).choices
        assert httpx.get(base + "/health").json()["status"] == "ok"


class Gated:
    """`model` whose first pass of each decode waits for `gate`: a request held in flight."""

    def __init__(self, model):
        self.model, self.entered, self.gate = model, threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.model, name)

    def prefill_step(self, *args, **kw):
        self.entered.set()
        assert self.gate.wait(60)
        return self.model.prefill_step(*args, **kw)


def test_shutdown_answers_the_request_in_flight_first(model):
    import socket

    import uvicorn

    gated, sock = Gated(model), socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(gated, max_wait_ms=0), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1", api_key="x", max_retries=0)
    with ThreadPoolExecutor(1) as pool:
        while not server.started:
            thread.join(0.01)
        reply = pool.submit(client.chat.completions.create, model="clover-mini", messages=user("Dana, floor 2"),
                            response_format=fmt(CONTACT))
        assert gated.entered.wait(60)
        server.should_exit = True       # what SIGTERM and SIGINT do
        gated.gate.set()
        assert json.loads(reply.result().choices[0].message.content)["priority"] in ("low", "high")
    thread.join()
    sock.close()


class _Round(BaseModel):
    kind: Literal["round"] = "round"
    lat: str


class _Settling(BaseModel):
    id: str
    area: Optional[_Round] = None
    tags: list[str] = Field(default_factory=list, max_length=2)
    late: str = Field(alias="a.b[1]")


def test_settled_nests_finished_fields_and_leaves_out_the_rest(model):
    from clover_struct.api import prepare

    canvas = prepare(_Settling, model)[1]
    ids = canvas.fill({"id": "v0", "area": {"kind": "round", "lat": "v1"}, "tags": ["v2", "v3"], "a.b[1]": "v4"})
    slot = {s.path: i for i, s in enumerate(canvas.slots)}
    done = [True] * len(canvas.slots)
    done[slot["tags[0]"]] = done[slot["a.b[1]"]] = False
    row = SimpleNamespace(canvas=canvas, ids=ids, done=done, present=[True] * len(canvas.groups))
    assert settled(row) == {"id": "v0", "area": {"kind": "round", "lat": "v1"}, "tags": [None, "v3"]}
    for undecided_or_absent in (None, False):
        row.present = [g.path != "area" or undecided_or_absent for g in canvas.groups]
        assert settled(row) == {"id": "v0", "tags": [None, "v3"]} | ({"area": None} if undecided_or_absent is False
                                                                    else {})


def test_a_stream_of_an_array_or_of_keys_that_look_like_paths_ends_in_the_record(client):
    for schema in ({"type": "array", "items": {"type": "integer"}, "minItems": 2},
                   {"type": "object", "properties": {"[1]": {"type": "integer"}, "a.b": {"type": "string"}},
                    "required": ["[1]", "a.b"]}):
        kw = dict(model="clover-mini", messages=user("floors 12 and 14, room B"), response_format=fmt(schema))
        final = json.loads(client.chat.completions.create(**kw).choices[0].message.content)
        objects = [json.loads(c.choices[0].delta.content) for c in client.chat.completions.create(stream=True, **kw)]
        assert objects[-1] == final and all(type(o) is type(final) for o in objects), objects


@pytest.mark.parametrize("argv,message", [(["--max-batch", "0"], "--max-batch must be at least 1"),
                                          (["--max-wait-ms", "-1"], "--max-wait-ms must be 0 to 60000"),
                                          (["--max-wait-ms", "inf"], "--max-wait-ms must be 0 to 60000"),
                                          (["--max-wait-ms", "nan"], "--max-wait-ms must be 0 to 60000"),
                                          (["--port", "70000"], "--port must be 0 to 65535"),
                                          (["--host", "nowhere.invalid"], "cannot listen on nowhere.invalid:8000")])
def test_serve_options_out_of_range_are_one_line(argv, message, capsys):
    """(A port past 65535 had been 'a bug in clover-struct' after two tracebacks.)"""
    from clover_struct import cli

    assert cli.main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_port_in_use_is_one_line_and_the_model_is_named_by_its_folder(model, tmp_path, monkeypatch, capsys):
    import socket

    from clover_struct import cli

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert cli.main(["serve", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    monkeypatch.chdir(model.source)   # `--model .` had served a model named ''
    with in_thread(create_app(load_model("."))) as base:
        assert httpx.get(base + "/v1/models").json()["data"][0]["id"] == Path(model.source).name


def test_past_max_pending_the_answer_is_503_busy(model):
    gated = Gated(model)
    with in_thread(create_app(gated, max_pending=1, max_wait_ms=0)) as base, ThreadPoolExecutor(1) as pool:
        client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        kw = dict(model="clover-mini", messages=user("Dana, floor 2"), response_format=fmt(CONTACT))
        first = pool.submit(client.chat.completions.create, **kw)
        assert gated.entered.wait(60)
        with pytest.raises(openai.APIStatusError, match="the server is busy") as e:
            client.chat.completions.create(**kw)
        assert e.value.status_code == 503
        gated.gate.set()
        assert first.result().choices[0].message.content
        assert client.chat.completions.create(**kw).choices   # answered once the first is done


def test_a_chat_template_that_fails_is_the_models_error_not_a_bug(toy_tokenizer, tmp_path, monkeypatch):
    """A template failing on any text stops the server before it starts; one failing on a schema
    answers that schema's requests with the template's fault (both had been 500 'a bug')."""
    pytest.importorskip("transformers")
    from clover_struct import CheckpointError
    from tiny_models import tiny_diffusion_gemma

    gemma = tiny_diffusion_gemma(toy_tokenizer, tmp_path, canvas=16, std=0.5, seed=4)
    monkeypatch.setattr(gemma.tokenizer, "chat_template", "{{ 1 // 0 }}")
    with pytest.raises(CheckpointError, match="fails on any text"):
        create_app(gemma)
    monkeypatch.setattr(gemma.tokenizer, "chat_template", "{% if 'Secret' in messages[0]['content'] %}{{ 1 // 0 }}"
                                                          "{% endif %}{{ messages[0]['content'] }}")
    with in_thread(create_app(gemma, max_wait_ms=0)) as base:
        asked = {"messages": user("EGTT closed"), "response_format": fmt({"title": "Secret", "type": "string"})}
        got = httpx.post(base + "/v1/chat/completions", json=asked, timeout=60)
        print(got.status_code, got.json())
        assert got.status_code == 500 and got.json()["error"]["code"] == "model_error"
        assert "chat template" in got.json()["error"]["message"] and "bug" not in got.json()["error"]["message"]
        asked["response_format"] = fmt({"title": "Open", "type": "string", "maxLength": 8})
        assert httpx.post(base + "/v1/chat/completions", json=asked, timeout=60).status_code == 200
