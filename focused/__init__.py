"""focused: a topical crawler built on Scrapy."""
