"""The machinery every suite shares: capability flags, known failures and the guard.

A *suite* is a class such as :class:`~charmem_contract.GraphStoreContract` (never named
``Test...``, so pytest does not collect it on its own). An adapter's test module subclasses it as
``TestSomething`` and overrides the suite's one abstract fixture, ``<handle>_factory``, which
yields a factory of handles (see :mod:`charmem_contract.factories`). What the subclass may change
is deliberately narrow, and :meth:`ContractSuite.test_contract_guard` enforces it:

* switch off a capability flag the suite lists in ``optional_capabilities`` (tests that need it
  are skipped with the flag's reason);
* mark a contract test as a known failure with :func:`known_failure` (an ``xfail`` with a reason,
  strict by default, so the day the adapter is fixed the mark has to go);
* nothing else: overriding or deleting a contract test, switching off a flag the suite does not
  allow, inventing a flag, or passing fewer than ``minimum_passing`` tests fails the guard.

A suite's own definition is checked when its class is created: every contract test's docstring
ends with a paragraph starting :data:`IF_THIS_FAILS` (what an adapter author checks when it
fails), and a stateful suite has its empty canary, a test named ``test_fixture_starts_empty...``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import pytest

__all__ = ["IF_THIS_FAILS", "ContractSuite", "known_failure", "requires"]

F = TypeVar("F", bound=Callable[..., Any])

_REQUIRES = "__contract_requires__"
_FORBIDDEN_CLASS_MARKS = frozenset({"skip", "skipif", "xfail"})
#: How the last paragraph of every contract test's docstring starts: what to check when it fails.
IF_THIS_FAILS = "If this fails:"
#: The name (a prefix) of the empty canary every stateful suite has.
CANARY = "test_fixture_starts_empty"


def requires(*flags: str) -> Callable[[F], F]:
    """Mark a contract test as needing capability ``flags`` (skipped when one is off).

    Args:
        *flags: names of class attributes declared in the suite's ``capabilities``.

    Returns:
        A decorator that records the flags on the test function.
    """

    def mark(test: F) -> F:
        setattr(test, _REQUIRES, (*getattr(test, _REQUIRES, ()), *flags))
        return test

    return mark


def known_failure(test: F, *, reason: str, strict: bool = True) -> F:
    """A copy of contract ``test`` marked ``xfail(reason=..., strict=strict)``.

    Use it in an adapter's test class for a contract test the adapter is known to fail::

        class TestMyStore(GraphStoreContract):
            test_atomic_batch_leaves_nothing = known_failure(
                GraphStoreContract.test_atomic_batch_leaves_nothing,
                reason="MyStore writes items one by one; issue #12",
            )

    The suite's own function is not modified (pytest marks are stored on the function, so marking
    it directly would mark it for every adapter).

    Args:
        test: the suite's test function (``SomeContract.test_name``).
        reason: why it fails and where the fix is tracked; must not be blank.
        strict: keep the default ``True`` so an unexpected pass fails and the mark is removed.

    Returns:
        A new test function with the same signature, fixtures and marks, plus the xfail mark.

    Raises:
        ValueError: ``reason`` is blank.
    """
    if not reason.strip():
        raise ValueError("known_failure needs a reason: say what the adapter gets wrong")
    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(test):

        @functools.wraps(test)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            return await test(*args, **kwargs)

        wrapper = async_wrapper
    else:

        @functools.wraps(test)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            return test(*args, **kwargs)

        wrapper = sync_wrapper
    marked: F = pytest.mark.xfail(reason=reason, strict=strict)(wrapper)
    return marked


def _last_paragraph(test: Callable[..., Any]) -> str:
    """The last paragraph of ``test``'s docstring (``""`` without one)."""
    return inspect.cleandoc(test.__doc__ or "").split("\n\n")[-1].strip()


def _xfail_reason(obj: object) -> str | None:
    for mark in getattr(obj, "pytestmark", ()):
        if getattr(mark, "name", None) == "xfail":
            reason = mark.kwargs.get("reason") or (mark.args[1] if len(mark.args) > 1 else None)
            if isinstance(reason, str) and reason.strip():
                return reason
    return None


class ContractSuite:
    """Base of every contract suite (not collected: its name does not start with ``Test``).

    Class attributes a suite sets:
        capabilities: flag name -> what the adapter does when the flag is on. Every flag is
            ``True`` by default; tests decorated with :func:`requires` skip when it is off.
        optional_capabilities: the only flags an adapter may switch off.
        minimum_passing: how many contract tests an adapter must run (not skipped by a flag,
            not a known failure) for the guard to pass.
        stateful: ``False`` only for a suite of stateless handles (no empty canary then).
    """

    capabilities: ClassVar[Mapping[str, str]] = {}
    optional_capabilities: ClassVar[frozenset[str]] = frozenset()
    minimum_passing: ClassVar[int] = 0
    #: Whether the handles keep state between calls (then the suite has an empty canary).
    stateful: ClassVar[bool] = True
    _is_suite: ClassVar[bool] = True

    def __init_subclass__(cls, *, suite: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._is_suite = suite
        if suite:
            cls._check_suite_definition()
            return
        if "test_contract_guard" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} overrides test_contract_guard; the guard is part of the contract "
                "and cannot be replaced"
            )
        for mark in cls.__dict__.get("pytestmark", ()) if "pytestmark" in cls.__dict__ else ():
            if getattr(mark, "name", None) in _FORBIDDEN_CLASS_MARKS:
                raise TypeError(
                    f"{cls.__name__} marks the whole suite {mark.name}; switch off capability flags "
                    "or mark single tests with charmem_contract.known_failure instead"
                )

    @classmethod
    def _check_suite_definition(cls) -> None:
        unknown = cls.optional_capabilities - set(cls.capabilities)
        if unknown:
            raise TypeError(f"{cls.__name__}.optional_capabilities names undeclared flags {sorted(unknown)}")
        tests = cls.contract_tests()
        for name, test in tests.items():
            for flag in getattr(test, _REQUIRES, ()):
                if flag not in cls.capabilities:
                    raise TypeError(f"{cls.__name__}.{name} requires undeclared flag {flag!r}")
            if not _last_paragraph(test).startswith(IF_THIS_FAILS):
                raise TypeError(
                    f"{cls.__name__}.{name}: the docstring must end with a paragraph starting "
                    f"{IF_THIS_FAILS!r} that says what an adapter author checks"
                )
        if cls.stateful and not any(name.startswith(CANARY) for name in tests):
            raise TypeError(f"{cls.__name__} is stateful but has no empty canary ({CANARY}...)")
        for flag in cls.capabilities:
            if flag not in cls.__dict__ and not hasattr(cls, flag):
                setattr(cls, flag, True)

    # -- introspection ---------------------------------------------------------------------

    @classmethod
    def suite_class(cls) -> type[ContractSuite]:
        """The suite this class is (or subclasses): the nearest class declared ``suite=True``."""
        for klass in cls.__mro__:
            if (
                isinstance(klass, type)
                and issubclass(klass, ContractSuite)
                and klass.__dict__.get("_is_suite")
            ):
                return klass
        return ContractSuite

    @classmethod
    def contract_tests(cls) -> dict[str, Callable[..., Any]]:
        """The suite's own tests by name (those the suite class defines or inherits)."""
        suite = cls.suite_class()
        tests: dict[str, Callable[..., Any]] = {}
        for klass in reversed(suite.__mro__):
            for name, value in vars(klass).items():
                if name.startswith("test") and callable(value):
                    tests[name] = value
        return tests

    @classmethod
    def guard_violations(cls) -> list[str]:
        """Every way this adapter class departs from what its suite allows (empty when fine)."""
        return [*cls._flag_problems(), *cls._test_problems()]

    @classmethod
    def _flag_problems(cls) -> list[str]:
        """Flags that are not booleans, switched off without leave, or unknown (typos)."""
        suite = cls.suite_class()
        problems: list[str] = []
        for flag in sorted(suite.capabilities):
            value = getattr(cls, flag, True)
            if not isinstance(value, bool):
                problems.append(f"{flag} = {value!r}: capability flags are True or False")
            elif not value and flag not in suite.optional_capabilities:
                allowed = ", ".join(sorted(suite.optional_capabilities)) or "none"
                problems.append(
                    f"{flag} = False, but {suite.__name__} does not let adapters switch it off "
                    f"(it may switch off only: {allowed}); make the adapter {suite.capabilities[flag]}"
                )
        known = ", ".join(sorted(suite.capabilities)) or "none"
        problems.extend(
            f"{name} is not a capability of {suite.__name__} (known flags: {known})"
            for name in sorted(dir(cls))
            if name.startswith("supports_") and name not in suite.capabilities
        )
        return problems

    @classmethod
    def _test_problems(cls) -> list[str]:
        """Contract tests overridden or deleted without a known-failure mark; too few left to run."""
        suite = cls.suite_class()
        problems: list[str] = []
        runnable = 0
        for name, original in cls.contract_tests().items():
            current = getattr(cls, name, None)
            if current is original:
                runnable += all(getattr(cls, flag, True) for flag in getattr(original, _REQUIRES, ()))
            elif current is None or not callable(current):
                problems.append(
                    f"{name} is deleted (set to {current!r}); keep it and mark it with "
                    f"charmem_contract.known_failure({suite.__name__}.{name}, reason=...) if the adapter "
                    "fails it"
                )
            elif _xfail_reason(current) is None:
                problems.append(
                    f"{name} is overridden without xfail(reason=...); contract tests may not be "
                    f"replaced. Use {name} = known_failure({suite.__name__}.{name}, reason=...)"
                )
        if runnable < suite.minimum_passing:
            problems.append(
                f"only {runnable} contract tests run (the rest are switched off by capability flags "
                f"or marked known failures); {suite.__name__} requires at least {suite.minimum_passing}"
            )
        return problems

    # -- shared fixtures and tests ---------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _contract_capabilities(self, request: pytest.FixtureRequest) -> None:
        """Skip a test whose capability flags are off, with the flag's reason."""
        suite = type(self).suite_class()
        for flag in getattr(request.function, _REQUIRES, ()):
            if not getattr(self, flag, True):
                pytest.skip(f"{flag} = False: the adapter does not claim that it {suite.capabilities[flag]}")

    def test_contract_guard(self) -> None:
        """The adapter's test class changes only what its suite allows.

        If this fails: read the listed problems. Mark a failing contract test with
        ``known_failure(Suite.test_name, reason=...)`` rather than overriding or deleting it,
        switch off only the flags in the suite's ``optional_capabilities``, and check flag names
        for typos.
        """
        problems = type(self).guard_violations()
        assert not problems, f"{type(self).__name__} breaks the contract rules:\n- " + "\n- ".join(problems)
