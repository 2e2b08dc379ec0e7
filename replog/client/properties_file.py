"""Java .properties files as Kafka reads them, for a node's configuration and a client's --command-config."""


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: key=value or key:value lines, # and ! comments."""
    props = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ValueError(f"line {lineno}: expected key=value, got {raw!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props
