"""Item pipelines: ``relevance`` records a page's scores, ``storage`` writes its record."""
