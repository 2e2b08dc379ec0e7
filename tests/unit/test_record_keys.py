"""iter_record_keys, the log cleaner's cheap pass over a batch, agrees with the full decoder on every codec,
key and value shape, and refuses what the full decoder refuses."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.protocol.record_compaction import iter_record_keys
from replog.protocol.records import (
    Compression,
    CorruptRecordError,
    RecordBatch,
    build_batch,
    decode_records,
)

RECORD = st.tuples(st.one_of(st.none(), st.binary(max_size=300)), st.one_of(st.none(), st.binary(max_size=300)),
                   st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=2),
                   st.integers(min_value=0, max_value=1 << 40))


@settings(max_examples=60, deadline=None)
@given(records=st.lists(RECORD, min_size=1, max_size=20), compression=st.sampled_from(list(Compression)),
       base_offset=st.integers(min_value=0, max_value=1 << 40))
def test_keys_match_the_full_decoder(records, compression, base_offset):
    batch = RecordBatch(memoryview(bytearray(build_batch(records, compression=compression,
                                                         base_offset=base_offset))))
    expected = [(r.offset, r.key, r.value is None) for r in decode_records(batch)]
    assert list(iter_record_keys(batch)) == expected


def test_a_record_length_past_the_batch_is_corrupt():
    data = bytearray(build_batch([(b"k", b"v", [], 1)]))
    data[61] = 0x7E  # the first record's length varint: 63, far past the batch
    with pytest.raises(CorruptRecordError):
        list(iter_record_keys(RecordBatch(memoryview(data))))
