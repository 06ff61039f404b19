"""Pure altair chart builders: data in, ``alt.Chart`` out (tested through ``chart.to_dict()``).

Nothing here touches widgets or the notebook; ``aiadvisor.widgets`` wraps these charts in
``altair.JupyterChart``.
"""
