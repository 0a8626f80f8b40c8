"""Kubernetes' and the Gateway API's own validation rules for values a SpecServe passes into the objects it
renders (pure). Each function returns what is wrong with one value, or None, so the model validators and the
cross-field checks share one wording, and the operator refuses at the front door what the API server would
refuse later in a child object (a 422 on the Deployment the SpecServe owns).

The rules follow k8s.io/apimachinery/pkg/util/validation (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain,
IsCIdentifier-style env names), k8s.io/kubernetes/pkg/apis/core/validation (tolerations, resource requirements)
and the Gateway API's Hostname and HTTPPathMatch types.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
DNS_SUBDOMAIN_MAX = 253
LABEL_KEY_MAX = DNS_SUBDOMAIN_MAX + 1 + QUALIFIED_NAME_MAX
DNS_LABEL_MAX = 63

# Schema patterns (the API server checks them too; they cost nothing against the CEL budget).
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUALIFIED_NAME_PATTERN = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN_STRICT_PATTERN = rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$"
# [DNS-subdomain prefix/]name: the lengths of the parts are checked by label_key_problem.
LABEL_KEY_PATTERN = rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
# Gateway API v1 Hostname: no scheme, no port, no IP-only check here, a wildcard only as the leftmost label.
HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Gateway API HTTPPathMatch value (type PathPrefix): absolute, RFC 3986 path characters or %-escapes.
PATH_PATTERN = r"^/(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})*$"
PATH_MAX = 1024
# Substrings the Gateway API's CEL rules forbid in a path value.
PATH_FORBIDDEN = ("//", "/./", "/../", "%2f", "%2F", "#")
PATH_FORBIDDEN_SUFFIXES = ("/..", "/.")
# Environment variable names as the API server accepted them before 1.34 relaxed them (the strict form works on
# every supported cluster).
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# RFC 1035 label (IsDNS1035Label): Service names. Unlike an RFC 1123 label it may not start with a digit.
DNS_1035_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
# Object names by kind (apimachinery's NameIsDNS1035Label for Services, NameIsDNSSubdomain for the others the
# operator renders).
DNS_1035_KINDS = frozenset({"Service"})

_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)
_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_PATTERN)
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_STRICT_PATTERN)
_HOSTNAME = re.compile(HOSTNAME_PATTERN)
_PATH = re.compile(PATH_PATTERN)
_DNS_1035_LABEL = re.compile(DNS_1035_LABEL_PATTERN)
SHORTEN = "; shorten it"  # the fix a too-long value's message ends with


def _problem(value: str, subject: str, limit: int, pattern: re.Pattern[str], rule: str, fix: str = "") -> str | None:
    """What is wrong with ``value`` (named ``subject`` in the message): longer than ``limit`` characters (the message
    ends with ``fix``), else not matching ``pattern`` (``rule`` says what it must be)."""
    if len(value) > limit:
        return f"{subject} is longer than {limit} characters{fix}"
    if not pattern.match(value):
        return f"{subject} must {rule}"
    return None


def dns1035_label_problem(name: str) -> str | None:
    """Why ``name`` is not an RFC 1035 label (a Service name): lowercase letters, digits and '-', starting with a
    letter, ending alphanumeric, at most 63 characters."""
    rule = "start with a lowercase letter and hold only a-z, 0-9 and '-', ending alphanumeric"
    return _problem(name, repr(name), DNS_LABEL_MAX, _DNS_1035_LABEL, rule)


def object_name_problem(kind: str, name: str) -> str | None:
    """Why the API server would refuse ``name`` as the name of a ``kind`` object (Service: RFC 1035 label; the
    other kinds the operator renders: RFC 1123 subdomain)."""
    if kind in DNS_1035_KINDS:
        return dns1035_label_problem(name)
    rule = "be a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', alphanumeric at both ends)"
    return _problem(name, repr(name), DNS_SUBDOMAIN_MAX, _DNS_SUBDOMAIN, rule)


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label (or annotation, node selector, toleration) key: [prefix/]name."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"label key {key!r} has an empty prefix before '/'; drop the '/' or add a DNS prefix"
    if not name:
        return f"label key {key!r} has an empty name; write [prefix/]name"
    rule = "be alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    problem = _problem(name, f"label key {key!r}: the name part", QUALIFIED_NAME_MAX, _QUALIFIED_NAME, rule, SHORTEN)
    if problem is None and prefix:
        rule = "be a lowercase DNS subdomain such as example.com"
        problem = _problem(prefix, f"label key {key!r}: the prefix", DNS_SUBDOMAIN_MAX, _DNS_SUBDOMAIN, rule, SHORTEN)
    return problem


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value (empty is valid)."""
    rule = "be empty or alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return _problem(value, f"label value {value!r}", LABEL_VALUE_MAX, _LABEL_VALUE, rule, SHORTEN)


def hostname_problem(hostname: str) -> str | None:
    """Why `hostname` is not a Gateway API HTTPRoute hostname."""
    if "://" in hostname:
        return f"hostname {hostname!r} has a scheme; write the host name only, e.g. llm.example.com"
    if ":" in hostname:
        return f"hostname {hostname!r} has a port; HTTPRoute hostnames take no port (the Gateway listener has it)"
    rule = (
        "be a lowercase DNS name such as llm.example.com, with a wildcard only as the whole leftmost label"
        " (*.example.com)"
    )
    return _problem(hostname, f"hostname {hostname!r}", DNS_SUBDOMAIN_MAX, _HOSTNAME, rule)


def path_problem(path: str) -> str | None:
    """Why `path` is not a Gateway API PathPrefix value."""
    if len(path) > PATH_MAX:
        return f"path is longer than {PATH_MAX} characters"
    if not _PATH.match(path):
        return f"path {path!r} must start with / and hold only URL path characters (others %-encoded)"
    for bad in PATH_FORBIDDEN:
        if bad in path:
            return f"path {path!r} must not contain {bad!r} (the Gateway API refuses it)"
    for bad in PATH_FORBIDDEN_SUFFIXES:
        if path.endswith(bad):
            return f"path {path!r} must not end with {bad!r} (the Gateway API refuses it)"
    return None


def host_path_problem(path: str) -> str | None:
    """Why `path` is not a plain absolute host path (no '..', no '//'): prefix allowlists compare components."""
    if not path.startswith("/"):
        return "must be an absolute path starting with /"
    parts = path.split("/")[1:]
    if any(p in ("..", ".") for p in parts) or "//" in path:
        return f"{path!r} must be a normalised path without '.', '..' or '//'"
    return None


# ------------------------------------------------------------------------------------------------ quantities

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


def parse_quantity(text: str) -> Decimal | None:
    """The value of a Kubernetes resource.Quantity (as resource.ParseQuantity reads it), or None if invalid."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number)
        if exponent:
            return value * Decimal(10) ** int(exponent[1:])
    except InvalidOperation:
        return None
    return value * _SUFFIXES[suffix or ""]


def quantity_problem(text: str) -> str | None:
    return None if parse_quantity(text) is not None else f"{text!r} is not a Kubernetes quantity such as 32Gi or 500m"


def request_above_limit(request: str, limit: str) -> bool:
    """True when the request exceeds the limit (the API server refuses such a container)."""
    r, lim = parse_quantity(request), parse_quantity(limit)
    return r is not None and lim is not None and r > lim
