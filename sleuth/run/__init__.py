"""One run: start a target, drive it with clients while faults come and go, judge, report (`runner`)."""
