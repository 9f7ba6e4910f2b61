"""The episode viewer (``stateguard view``): static, self-contained HTML pages of episode records and training samples.

:mod:`harness.viewer.render` turns a record (or a sample's token mask) into one HTML string from the pieces of
:mod:`harness.viewer.markup` (the page shell, escaping builders), :mod:`harness.viewer.inputs` reads and checks what
is shown, :mod:`harness.viewer.cli` holds the command's arguments and writes the pages. The reward panel comes in as
data (:class:`~harness.viewer.render.RewardView`): :mod:`synthesis.view` registers the command and scores each record
against its fault label.
"""
