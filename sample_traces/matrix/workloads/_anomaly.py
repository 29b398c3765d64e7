"""Shared by the fifty-first held-out set: autograd's anomaly detection switched on for a step's life."""

import torch


def anomaly(on: bool):
    """torch.autograd.set_detect_anomaly(on) as a script sets it at its top (check_nan on, the default); returns the
    function that restores the previous mode (the harness runs the after variant in the same process)."""
    prev = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    torch.autograd.set_detect_anomaly(on)

    def restore():
        torch.autograd.set_detect_anomaly(*prev)
    return restore
