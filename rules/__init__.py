"""Shipped rule files of troubleshoot (data only; installed as `troubleshoot_rules`)."""
