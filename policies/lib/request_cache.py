"""Serve each Analyze/AnalyzeStack request with one conversion of its properties, not one per policy.

pulumi_policy's analyzer (1.21) converts a request's properties inside its loop over policies:
for every resource policy it turns the resource's and its provider's property Struct into a dict
(``json_format.MessageToDict``), deserializes it and wraps it in an unknown-checking proxy; for
every stack policy it does the same for every resource of the stack. Each step is a pure function
of its input and builds new objects, and the proxies are read-only mappings (every policy of this
pack copies them into plain data through ``kit``), so building them once per request and handing
the same objects to each policy changes nothing a policy sees; it only removes repeated work.

``install()`` is called by ``__main__.py`` before the pack is served. Outside Analyze and
AnalyzeStack (Configure, GetAnalyzerInfo, Remediate) nothing is memoized. ``shared_plain`` does the
same for the plain data ``kit`` hands to policies: converted once, read by all of them. ``install()`` also freezes the pack's import-time objects out of garbage collections and
collects young objects less often: an AnalyzeStack of thousands of resources otherwise spent half
its time in the collector rescanning objects that live until the answer is sent.
"""

from __future__ import annotations

import functools
import gc
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pulumi_policy.policy as _policy
from google.protobuf import json_format, struct_pb2

from lib import analyzer_loop

_request = threading.local()
_MISSING = object()


def _once_per_request(convert: Callable[[Any], Any]) -> Callable[..., Any]:
    """``convert(value)``, memoized by the identity of ``value`` while a request is served."""

    @functools.wraps(convert)
    def memoized(value: Any, *args: Any, **kwargs: Any) -> Any:
        memo = getattr(_request, "memo", None)
        if memo is None or args or kwargs:
            return convert(value, *args, **kwargs)
        key = (convert, id(value))
        hit = memo.get(key)
        # The entry keeps ``value`` alive, so its id cannot be reused while the request runs.
        if hit is None or hit[0] is not value:
            hit = memo[key] = (value, convert(value))
        return hit[1]

    return memoized


def message_to_dict(message: Any, *args: Any, **kwargs: Any) -> Any:
    """``json_format.MessageToDict``; a ``Struct`` (every resource's properties) by a direct walk.

    json_format's printer reaches each field through descriptors and a dispatch per field kind;
    for a Struct the result is simply its values (numbers as floats, null as ``None``), keys in the
    map's own order, which is what the walk below gives. Other messages and options go to
    json_format.
    """
    if args or kwargs or type(message) is not struct_pb2.Struct:
        return json_format.MessageToDict(message, *args, **kwargs)
    return _fields(message.fields)


def _fields(fields: Any) -> dict[str, Any]:
    return {key: _value(fields[key]) for key in fields}


def _value(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if math.isinf(number):
            raise ValueError("Fail to serialize Infinity for Value.number_value, which would parse as string_value")
        if math.isnan(number):
            raise ValueError("Fail to serialize NaN for Value.number_value, which would parse as string_value")
        return number
    if kind == "struct_value":
        return _fields(value.struct_value.fields)
    if kind == "list_value":
        return [_value(item) for item in value.list_value.values]
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or no kind at all


class PropertiesUnreadable(BaseException):
    """A resource's properties could not be converted when a policy first read them.

    A BaseException, so that it is not taken for a policy's own failure (``kit`` turns those into
    findings) and fails the request as the conversion failing up front did."""


class _Deferred:
    """A conversion of a request's properties, run when first needed and then kept.

    ``source``: the property Struct it is the plain conversion of (``None`` for a conversion with
    other options), by which equal properties of another request are recognized.
    """

    __slots__ = ("_compute", "_value", "source")
    _PENDING = object()

    def __init__(self, compute: Callable[[], Any], source: Any = None) -> None:
        self._compute, self._value, self.source = compute, self._PENDING, source

    def get(self) -> Any:
        if self._value is self._PENDING:
            try:
                self._value = self._compute()
            except Exception as error:  # noqa: BLE001 - re-raised as what it is, see PropertiesUnreadable
                raise PropertiesUnreadable(f"{type(error).__name__}: {error}") from error
            self._compute = None
        return self._value


class LazyProps(Mapping):
    """A resource's properties as pulumi_policy's unknown-checking proxy, built when first read.

    pulumi_policy converts every resource's properties for every call (Struct to dict,
    deserialized, then copied into a proxy tree) before any policy looks at them; most resources of
    a plan are of types no policy of this pack takes. ``lib.values.plain`` reads the deserialized
    data directly (:meth:`raw`), which gives what reading the proxy gives: the proxy only raises on
    the unknown sentinels that ``plain`` turns into ``UNKNOWN`` anyway. Anything else that reads
    these properties gets the real proxy.
    """

    __slots__ = ("_content", "_deserialized", "_proxy")

    def __init__(self, deserialized: _Deferred) -> None:
        self._deserialized, self._proxy, self._content = deserialized, None, _MISSING

    def raw(self) -> Any:
        """The deserialized properties (read only)."""
        return self._deserialized.get()

    def source(self) -> struct_pb2.Struct | None:
        """The property Struct these are the plain conversion of (``MessageToDict``, then
        ``deserialize_properties`` with its defaults); ``None`` if they were converted otherwise."""
        return self._deserialized.source

    def content(self) -> bytes | None:
        """The wire form of the property Struct these are the plain conversion of, the same for
        equal properties (map keys sorted); ``None`` if they were converted otherwise. Worked out
        once (the plain data is found by it, and ``values.free_of_unknowns`` reads it)."""
        if self._content is _MISSING:
            source = self._deserialized.source
            self._content = None if source is None else source.SerializeToString(deterministic=True)
        return self._content

    def _real(self) -> Any:
        if self._proxy is None:
            self._proxy = _sdk_unknown_checking_proxy(self.raw())
        return self._proxy

    def __getitem__(self, key: Any) -> Any:
        return self._real()[key]

    def __iter__(self) -> Any:
        return iter(self._real())

    def __len__(self) -> int:
        return len(self._real())


_sdk_deserialize_properties = _policy.deserialize_properties
_sdk_unknown_checking_proxy = _policy.unknown_checking_proxy


def _deferred_message_to_dict(message: Any, *args: Any, **kwargs: Any) -> Any:
    if args or kwargs or type(message) is not struct_pb2.Struct or getattr(_request, "memo", None) is None:
        return message_to_dict(message, *args, **kwargs)
    return _Deferred(lambda: message_to_dict(message), source=message)


def _deferred_deserialize(value: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(value, _Deferred):
        return _Deferred(lambda: _sdk_deserialize_properties(value.get(), *args, **kwargs),
                         source=None if args or kwargs else value.source)
    return _sdk_deserialize_properties(value, *args, **kwargs)


def lazy_props(properties: Any) -> LazyProps:
    """A resource's property Struct as pulumi_policy's proxy over its conversion (``MessageToDict``,
    then ``deserialize_properties``), converted when first read: the three steps the analyzer
    takes, without a memo entry for each (AnalyzeStack makes one per resource of the stack)."""
    return LazyProps(_Deferred(lambda: _sdk_deserialize_properties(message_to_dict(properties)), source=properties))


def _deferred_proxy(value: Any) -> Any:
    return LazyProps(value) if isinstance(value, _Deferred) else _sdk_unknown_checking_proxy(value)


def _once_per_request_method(method: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``method(self, message)`` memoized like :func:`_once_per_request`, by the message (the
    objects it returns are read, never changed, by this pack's policies)."""

    @functools.wraps(method)
    def once(self: Any, message: Any) -> Any:
        memo = getattr(_request, "memo", None)
        if memo is None:
            return method(self, message)
        key = ("method", method, id(message))
        hit = memo.get(key)
        if hit is None or hit[0] is not message:
            hit = memo[key] = (message, method(self, message))
        return hit[1]

    return once


class _JsonFormat:
    """``json_format`` as pulumi_policy's analyzer sees it, with ``MessageToDict`` memoized (and,
    within Analyze and AnalyzeStack, deferred: see :class:`LazyProps`)."""

    MessageToDict = staticmethod(_once_per_request(_deferred_message_to_dict))

    def __getattr__(self, name: str) -> Any:
        return getattr(json_format, name)


def _per_request(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def serve(self: Any, request: Any, context: Any) -> Any:
        _request.memo = {}
        try:
            return method(self, request, context)
        except PropertiesUnreadable as unreadable:
            # The conversion's own error, as pulumi_policy raised it converting up front: gRPC
            # answers an Exception with an error status, while a BaseException leaving the
            # handler left the call unanswered (the engine would wait for ever).
            raise unreadable.__cause__ or RuntimeError(str(unreadable)) from None
        finally:
            _request.memo = None

    return serve


def per_request(key: Any, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per request for ``key`` (hashable), every time outside a request. For a
    result two policies derive alike from the same request; they must only read it."""
    memo = getattr(_request, "memo", None)
    if memo is None:
        return compute()
    entry = ("per_request", key)
    if entry not in memo:
        memo[entry] = compute()
    return memo[entry]


def copy_plain(value: Any) -> Any:
    """A fresh copy of plain data (dicts and lists; the leaves are immutable and shared)."""
    if isinstance(value, dict):
        return {k: copy_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_plain(v) for v in value]
    return value


def shared_plain(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert(proxy)`` (a proxy-to-plain-data conversion) computed once per request and proxy,
    and once per content for the properties of resources, the same object for every reader.

    Once per content: the engine sends a resource's properties in its Analyze call and again in
    AnalyzeStack; both are converted from equal Structs, so AnalyzeStack reuses what the resource
    policies' reading had converted (at 500 models, a third of AnalyzeStack's work). Equality is
    that of the Struct's deterministic wire form, computed in C.

    The same object: readers must not change it. ``kit`` hands it to policies, and its strict mode
    (the pack's tests) fails a policy that changes what it was handed (:func:`watch_handed_out`);
    copying it for every policy was a third of an AnalyzeStack at 500 models.
    """
    once = _once_per_request(_once_per_content(convert))

    def shared(value: Any) -> Any:
        result = once(value)
        handed = getattr(_request, "handed_out", None)
        if handed is not None:
            handed.append((result, _fingerprint(result)))
        return result

    return shared


def watch_handed_out(already: list[Any] = ()) -> None:
    """From now on (this thread), remember what :func:`shared_plain` hands out and how it was;
    ``already``: values handed out before, to watch too."""
    _request.handed_out = [(value, _fingerprint(value)) for value in already]


def changed_since_handed_out() -> list[Any]:
    """What was handed out since :func:`watch_handed_out` and is not as it was; stops watching."""
    handed, _request.handed_out = getattr(_request, "handed_out", None) or [], None
    return [value for value, fingerprint in handed if _fingerprint(value) != fingerprint]


def _fingerprint(value: Any) -> str:
    return repr(value)


_BY_CONTENT: dict[tuple[Any, bytes], Any] = {}


def _once_per_content(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def converted(value: Any) -> Any:
        content = value.content() if type(value) is LazyProps else None
        if content is None:
            return convert(value)
        key = (convert, content)
        hit = _BY_CONTENT.get(key, _MISSING)
        if hit is _MISSING:
            hit = _BY_CONTENT[key] = convert(value)
        return hit

    return converted



def install() -> None:
    servicer = _policy._PolicyAnalyzerServicer
    if getattr(servicer, "_converts_once_per_request", False):
        return
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    servicer.Analyze = _per_request(servicer.Analyze)
    servicer.AnalyzeStack = _per_request(servicer.AnalyzeStack)
    analyzer_loop.install(wrap=_per_request, props_of=lazy_props)
    servicer._converts_once_per_request = True
    # Options and provider of a request's resource, built once per request rather than per policy.
    servicer._get_resource_options = _once_per_request_method(servicer._get_resource_options)
    servicer._get_provider_resource = _once_per_request_method(servicer._get_provider_resource)
    _policy.json_format = _JsonFormat()
    _policy.deserialize_properties = _once_per_request(_deferred_deserialize)
    _policy.unknown_checking_proxy = _once_per_request(_deferred_proxy)
