"""What a submission is: its sources, a submissions folder's intake, and notebooks turned into functions."""
