"""The partition metadata file keeps a directory's topic id, and refuses a directory of another topic."""

import uuid

import pytest

from replog.log.errors import CorruptCheckpointError, InconsistentTopicIdError
from replog.log.partition_metadata_file import PartitionMetadataFile


def test_a_new_directory_takes_the_given_topic_id_and_keeps_it(tmp_path):
    topic_id = uuid.uuid4()
    assert PartitionMetadataFile(tmp_path).read() is None
    assert PartitionMetadataFile(tmp_path).reconcile(topic_id) == topic_id
    assert PartitionMetadataFile(tmp_path).read() == topic_id
    assert PartitionMetadataFile(tmp_path).reconcile(None) == topic_id  # a reopen without a topic id


def test_without_a_topic_id_no_file_is_written(tmp_path):
    assert PartitionMetadataFile(tmp_path).reconcile(None) is None
    assert not (tmp_path / "partition.metadata").exists()


def test_a_directory_of_another_topic_id_is_refused(tmp_path):
    PartitionMetadataFile(tmp_path).write(uuid.uuid4())
    with pytest.raises(InconsistentTopicIdError):
        PartitionMetadataFile(tmp_path).reconcile(uuid.uuid4())


@pytest.mark.parametrize("content", ["", "version: 1\ntopic_id: 00000000-0000-0000-0000-000000000001\n",
                                     "version: 0\n", "version: 0\ntopic_id: not-a-uuid\n"])
def test_a_malformed_file_is_an_error_not_a_missing_id(tmp_path, content):
    (tmp_path / "partition.metadata").write_text(content)
    with pytest.raises(CorruptCheckpointError):
        PartitionMetadataFile(tmp_path).read()
