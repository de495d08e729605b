"""Adapters that run advest estimators inside other trainers (verl, TRL) and theirs inside
``advest check``; each imports its trainer lazily."""
