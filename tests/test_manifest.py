from pipeline.manifest import Manifest


def test_toy_download_runs(toy_run):
    parts = Manifest.load(toy_run).parts("download")
    assert len(parts) == 4
