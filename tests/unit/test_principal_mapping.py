"""ssl.principal.mapping.rules (KIP-371) as Kafka's SslPrincipalMapper reads and applies them: table tests on
the pure rules (replog/security/principal_mapping.py)."""

import pytest

from replog.security.principal_mapping import DEFAULT_MAPPER, NoMatchingRule, PrincipalMapper

DN = "CN=alice,OU=ServiceUsers,O=Example,L=Zurich,C=CH"


@pytest.mark.parametrize(
    ("rules", "name", "expected"),
    [
        (None, DN, DN),
        ("DEFAULT", DN, DN),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", DN, "alice"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U", DN, "ALICE"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),C=(.*?)$/$1@$2/L", DN, "alice@serviceusers"),
        # The first rule that applies wins; one that does not match is skipped.
        ("RULE:^CN=(.*?),OU=Admins.*$/admin-$1/, RULE:^CN=(.*?),.*$/$1/, DEFAULT", DN, "alice"),
        ("RULE:^CN=(.*?),OU=Admins.*$/$1/,DEFAULT", DN, DN),
        # A pattern must match the whole name.
        ("RULE:CN=(.*?),/$1/,DEFAULT", DN, DN),
        # Escaped slashes and commas inside a pattern.
        (r"RULE:^CN=([^,]*)\/x,(.*)$/$1 $2/", "CN=a/x,O=b", "a O=b"),
        # $n beyond the groups is literal; $12 with one group is $1 then "2"; $0 is the whole match; \x is x.
        ("RULE:^CN=(.*?),.*$/$1-$4/", DN, "alice-$4"),
        ("RULE:^CN=(.*?),.*$/$12/", DN, "alice2"),
        ("RULE:^CN=alice,.*$/$0!/", "CN=alice,O=x", "CN=alice,O=x!"),
        (r"RULE:^CN=(.*?),.*$/\$1=$1/", DN, "$1=alice"),
        # Java's replaceAll: a pattern that also matches the empty end replaces twice.
        ("RULE:.*/x/", "abc", "xx"),
        # Case-insensitive and named groups, as Java writes them.
        ("RULE:(?i)^cn=(?<user>[a-z]+),.*$/${user}/", DN, "alice"),
        # Empty rules are ignored.
        ("DEFAULT,,", DN, DN),
    ],
)
def test_mapping(rules, name, expected):
    assert PrincipalMapper.parse(rules).name(name) == expected


@pytest.mark.parametrize("rules", ["foo", "DEFAULTX", "RULE:^CN=(.*)$/$1", "RULE:^CN=(.*$/$1/", "RULE:a/b/X",
                                   "DEFAULT, RULE:a/b/c"])
def test_bad_rules_are_refused(rules):
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        PrincipalMapper.parse(rules)


def test_a_name_no_rule_applies_to_is_not_authenticated():
    mapper = PrincipalMapper.parse("RULE:^CN=(.*?),OU=Admins.*$/$1/")
    with pytest.raises(NoMatchingRule, match="CN=alice"):
        mapper.name(DN)
    assert DEFAULT_MAPPER.name(DN) == DN
