"""Recommendations: parallel plans and memory arithmetic, hardware and precision rankings,
tactic rules. Pure Python over schema objects; torch is never imported here."""
