"""Evaluation harnesses, each callable from any host: SentEval's protocol (``senteval``), SVM graph classification
(``graph_svm``), node classification (``node_classification``), kNN and linear probes (``knn``, ``linear_probe``),
ranking metrics (``ranking``) and the social-bias benchmarks (``bias``)."""
