"""`ssl.principal.mapping.rules` (KIP-371): from a TLS peer's distinguished name to the name of its principal.

Kafka's rules, in order, the first that applies wins:
- `DEFAULT`: the distinguished name as it is (RFC 2253, e.g. CN=alice,OU=eng,O=Example,C=US);
- `RULE:pattern/replacement/` with an optional `L` or `U` after the last slash (lower or upper case): applies
  when the regular expression matches the whole name; the name becomes every match of the pattern replaced
  (Java's String.replaceAll), `$1`... or `${name}` naming its groups; a `$n` beyond the groups, after Java's dropping of
  trailing digits ($12 is group 1 then "2" when there is no group 12), stays literal; `\\x` is a literal x.
Rules are separated by commas (a pattern may hold commas and `\\/`). A name no rule applies to fails the
connection's authentication, as in Kafka. The default is `DEFAULT`.

Patterns are Java regular expressions; the common forms (classes, groups, lazy quantifiers, anchors, `(?i)`)
mean the same to Python's `re`, and a named group `(?<name>...)` is taken as Python's `(?P<name>...)`.
"""

import re
from dataclasses import dataclass

PRINCIPAL_MAPPING_RULES_KEY = "ssl.principal.mapping.rules"
DEFAULT_RULES = "DEFAULT"

_SEPARATOR = re.compile(r"\s*,\s*")
_JAVA_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")
_NAMED_REFERENCE = re.compile(r"\$\{([A-Za-z][A-Za-z0-9]*)\}")


class NoMatchingRule(Exception):
    """No mapping rule applies to a distinguished name: the peer is not authenticated."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        mapped = self.pattern.sub(lambda m: _expand(self.replacement, m), name)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    rules: tuple[MappingRule, ...]

    @classmethod
    def parse(cls, text: str | None) -> "PrincipalMapper":
        """The rules of a `ssl.principal.mapping.rules` value; ValueError names a rule that is not one."""
        return cls(tuple(_parse_rules(DEFAULT_RULES if text is None else text.strip())))

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            if (mapped := rule.apply(distinguished_name)) is not None:
                return mapped
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {distinguished_name}")


def _parse_rules(text: str) -> list[MappingRule]:
    rules, at = [], 0
    while at < len(text):
        if text.startswith("DEFAULT", at):
            rule, at = MappingRule(None), at + len("DEFAULT")
        elif text.startswith("RULE:", at):
            pattern, at = _until_unescaped_slash(text, at + len("RULE:"))
            replacement, at = _until_unescaped_slash(text, at)
            case = text[at] if at < len(text) and text[at] in "LU" else ""
            at += len(case)
            try:
                rule = MappingRule(re.compile(_JAVA_NAMED_GROUP.sub("(?P<", pattern)), replacement, case)
            except re.error as e:
                raise ValueError(f"{PRINCIPAL_MAPPING_RULES_KEY}: bad pattern {pattern!r}: {e}") from e
        else:
            rule = None  # an empty rule (two commas in a row) is ignored; anything else is an error
        if rule is not None:
            rules.append(rule)
        if at == len(text):
            break
        if (separator := _SEPARATOR.match(text, at)) is None:
            end = text.find(",", at)
            raise ValueError(f"{PRINCIPAL_MAPPING_RULES_KEY}: invalid rule: unmatched "
                             f"{text[at:None if end < 0 else end]!r}")
        at = separator.end()
    return rules


def _until_unescaped_slash(text: str, at: int) -> tuple[str, int]:
    """The text from `at` to the next slash not escaped by a backslash, and the position after that slash."""
    start = at
    while at < len(text):
        if text[at] == "\\":
            at += 2
        elif text[at] == "/":
            return text[start:at], at + 1
        else:
            at += 1
    raise ValueError(f"{PRINCIPAL_MAPPING_RULES_KEY}: invalid rule: no closing '/' after {text[start:]!r}")


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher replacement: `$n` is group n ($0 the whole match; the longest number naming a group; one
    beyond the groups stays literal, as Kafka escapes it), `${name}` a named group, `\\x` is x."""
    groups = match.re.groups
    out, at = [], 0
    while at < len(replacement):
        char = replacement[at]
        if char == "\\" and at + 1 < len(replacement):
            out.append(replacement[at + 1])
            at += 2
        elif char == "$" and (named := _NAMED_REFERENCE.match(replacement, at)) is not None \
                and named.group(1) in match.re.groupindex:
            out.append(match.group(named.group(1)) or "")
            at = named.end()
        elif char == "$" and at + 1 < len(replacement) and replacement[at + 1].isdigit():
            end = at + 2
            number = int(replacement[at + 1])
            while end < len(replacement) and replacement[end].isdigit() and number * 10 + int(replacement[end]) <= groups:
                number, end = number * 10 + int(replacement[end]), end + 1
            if number > groups:
                out.append(replacement[at:end])  # not a group: literal
            else:
                out.append(match.group(number) or "")  # $0: the whole match
            at = end
        else:
            out.append(char)
            at += 1
    return "".join(out)


DEFAULT_MAPPER = PrincipalMapper.parse(None)
