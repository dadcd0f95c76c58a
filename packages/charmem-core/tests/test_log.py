"""charmem's structlog events reach stdlib handlers with their fields as fields."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from charmem.log import get_logger, record_field_name

PASSWORD = "s3cr3t-pw"


class _Capture(logging.Handler):
    """A plain stdlib handler keeping the records it is given."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def captured() -> Iterator[_Capture]:
    handler = _Capture()
    logger = logging.getLogger("charmem.test_log")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def test_the_event_name_and_each_key_are_attributes_of_the_record(captured: _Capture) -> None:
    get_logger("charmem.test_log").info("collection_checked", collection="c1", objects=3, consistent=True)
    [record] = captured.records
    assert record.levelno == logging.INFO
    assert record.__dict__["event"] == "collection_checked"
    assert record.__dict__["collection"] == "c1"
    assert record.__dict__["objects"] == 3  # values keep their types
    assert record.__dict__["consistent"] is True
    # the rendered message is unchanged: the event first, then the sorted keys
    assert record.getMessage() == "event='collection_checked' collection='c1' consistent=True objects=3"


def test_a_key_named_like_a_record_attribute_gets_a_trailing_underscore(captured: _Capture) -> None:
    get_logger("charmem.test_log").debug("shard_opened", created=True, name="x", module="m")
    [record] = captured.records
    assert record_field_name("created") == "created_"
    assert record.__dict__["created_"] is True
    assert record.__dict__["name_"] == "x" and record.__dict__["module_"] == "m"
    assert record.name == "charmem.test_log"  # the record's own attributes are untouched
    assert isinstance(record.created, float)


def test_fields_are_masked_like_the_message(captured: _Capture) -> None:
    get_logger("charmem.test_log").warning(
        "endpoint_failed", endpoint=f"http://alice:{PASSWORD}@db.example/", api_key="sk-live-secret"
    )
    [record] = captured.records
    everything = repr(record.__dict__) + record.getMessage()
    assert PASSWORD not in everything and "sk-live-secret" not in everything
    assert record.__dict__["endpoint"] == "http://alice:***@db.example/"


def test_exception_passes_the_traceback_to_logging(captured: _Capture) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        get_logger("charmem.test_log").exception("request_failed", path="/v1/x")
    [record] = captured.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    assert record.__dict__["path"] == "/v1/x"
    assert "exc_info" not in record.getMessage()


def test_below_the_logger_level_nothing_is_built(captured: _Capture) -> None:
    logging.getLogger("charmem.test_log").setLevel(logging.WARNING)
    get_logger("charmem.test_log").info("quiet", n=1)
    assert captured.records == []
