"""The bottom room: the history format (`jsonl`), Jepsen's formats (`edn`, `imports`), a history read as it grows (`follow`). Imports only `sleuth.base`."""
