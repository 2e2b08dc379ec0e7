"""The controller's half of KIP-554: AlterUserScramCredentials decided with Kafka's rules
(server/scram_credentials.py), committed as credential records, and sent to every broker with UpdateMetadata;
and the cluster's first credentials (bootstrap.scram.credentials, as `kafka-storage format --add-scram`),
written once, when the metadata log has none yet."""

import logging
from collections.abc import Sequence

from replog.server.sasl import ScramCredential
from replog.server.scram_credentials import (
    MECHANISM_CODES,
    Deletion,
    Upsertion,
    UserResult,
    decide_alterations,
    derive_credential,
)

from . import records
from .admin import AdminTarget
from .propagation import PropagationError

log = logging.getLogger(__name__)


def change_records(changes: Sequence[Deletion | Upsertion]) -> list[records.Record]:
    out = []
    for change in changes:
        mechanism = MECHANISM_CODES[change.mechanism]
        if isinstance(change, Deletion):
            out.append(records.remove_scram_credential_record(mechanism, change.name))
        else:
            credential = derive_credential(mechanism, change.salt, change.salted_password, change.iterations)
            out.append(records.scram_credential_record(mechanism, change.name, credential))
    return out


async def alter_credentials(target: AdminTarget, deletions: Sequence[Deletion],
                            upsertions: Sequence[Upsertion]) -> list[UserResult]:
    results, changes = decide_alterations(target.metadata.scram, deletions, upsertions)
    if not changes:
        return results
    target.commit_records(change_records(changes))
    log.info("SCRAM credentials changed for %s", ", ".join(sorted({c.name for c in changes})))
    try:
        await target.propagator.wait(target.propagator.update_metadata())
    except PropagationError as e:
        # Committed: a broker that missed it gets it with the next metadata push (or when it registers).
        log.warning("SCRAM credential change committed but not yet applied everywhere: %s", e)
    return results


def bootstrap_records(credentials: Sequence[tuple[str, str, ScramCredential]]) -> list[records.Record]:
    """The records a new cluster starts with: its first credentials, then the mark that they were written."""
    return [records.scram_credential_record(m, user, c) for m, user, c in credentials] + [records.bootstrap_record()]
